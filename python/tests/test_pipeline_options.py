"""The pipelines' options as _core classes (ConvertOptions, CheckpointLayout,
MergeLoraOptions, ExportOptions, ImportOptions, SaveOptions, RestoreOptions,
PlanOptions): made by keyword only, each field read back, passed whole, and
shown as the call that makes them."""

from __future__ import annotations

import numpy as np
import pytest

import reshard
from reshard import _core, errors


def layout() -> _core.CheckpointLayout:
    return _core.CheckpointLayout(mesh=reshard.Mesh(np.arange(2), ("x",)), topology=reshard.Topology.uniform(2, 1),
                                  rules=[("*", reshard.PartitionSpec("x"))], best_effort_axis=None, strict=True)


@pytest.mark.parametrize("make", [
    lambda: _core.ConvertOptions("hf"),
    lambda: _core.MergeLoraOptions("bf16"),
    lambda: _core.CheckpointLayout(reshard.Mesh(np.arange(2), ("x",)), reshard.Topology.uniform(2, 1)),
    lambda: _core.SaveOptions(None, True),
    lambda: _core.RestoreOptions(False),
    lambda: reshard.PlanOptions(False),
], ids=["ConvertOptions", "MergeLoraOptions", "CheckpointLayout", "SaveOptions", "RestoreOptions", "PlanOptions"])
def test_positional_construction_is_a_type_error(make):
    with pytest.raises(TypeError):
        make()


def test_convert_options_by_keyword_keep_what_was_given_and_the_library_defaults():
    options = _core.ConvertOptions(output="checkpoint", dtype="bf16", max_shard_size=1024, replace=True,
                                   layout=layout())
    assert (options.output, options.dtype, options.max_shard_size, options.replace) == ("checkpoint", "BF16", 1024, True)
    assert options.layout.strict and options.layout.best_effort_axis is None
    defaults = _core.ConvertOptions(output="hf")
    assert (defaults.dtype, defaults.max_shard_size, defaults.replace, defaults.layout) == (
        None, _core.DEFAULT_MAX_SHARD_SIZE, False, None)


def test_merge_lora_options_by_keyword_keep_what_was_given_and_the_library_defaults():
    options = _core.MergeLoraOptions(dtype="f16", max_shard_size=4096, replace=True, block_bytes=512, threads=3)
    assert (options.dtype, options.max_shard_size, options.replace, options.block_bytes, options.threads) == (
        "F16", 4096, True, 512, 3)
    defaults = _core.MergeLoraOptions()
    assert (defaults.dtype, defaults.max_shard_size, defaults.block_bytes, defaults.threads) == (
        None, _core.DEFAULT_MAX_SHARD_SIZE, _core.DEFAULT_MERGE_BLOCK_BYTES, 0)


def test_save_and_restore_options_by_keyword_keep_what_was_given_and_the_library_defaults():
    options = _core.SaveOptions(metadata=[("run", "7")], replace=True, staging_bytes=4096, checksum_block_bytes=0)
    assert (options.metadata, options.replace, options.staging_bytes, options.checksum_block_bytes) == (
        [("run", "7")], True, 4096, 0)
    defaults = _core.SaveOptions()
    assert (defaults.metadata, defaults.replace, defaults.staging_bytes) == (None, False, _core.DEFAULT_STAGING_BYTES)
    assert defaults.checksum_block_bytes > 0
    assert _core.RestoreOptions().verify_checksums and not _core.RestoreOptions(verify_checksums=False).verify_checksums


@pytest.mark.parametrize("options", [
    _core.SaveOptions(metadata=[("run", "7")], replace=True, staging_bytes=4096, checksum_block_bytes=0),
    _core.RestoreOptions(verify_checksums=False),
    reshard.PlanOptions(fan_out=False, balance_senders=True),
    _core.ExportOptions(kind="adapter", dtype="bf16", max_shard_size=1 << 20, base="/models/base", gather_to=2,
                        replace=True, hf_config_json="{}", part_bytes=1 << 23, parts_in_flight=2),
    _core.ImportOptions(dtype="f16", sizes={"heads": 8}, base="/models/base", replace=True),
    _core.ConvertOptions(output="safetensors", dtype="f32", max_shard_size=4096, replace=True),
    _core.MergeLoraOptions(dtype="f16", max_shard_size=4096, replace=True, block_bytes=512, threads=3),
], ids=lambda o: type(o).__name__)
def test_an_options_repr_is_the_keyword_call_that_makes_it(options):
    shown = repr(options)
    assert shown.startswith(type(options).__name__ + "(")
    again = eval(shown, {**vars(_core), "PlanOptions": reshard.PlanOptions})  # noqa: S307 - our own repr
    assert repr(again) == shown


def test_a_bad_value_is_the_library_error_naming_it():
    with pytest.raises(errors.InvalidArgumentError, match="unknown output 'folder'"):
        _core.ConvertOptions(output="folder")
    with pytest.raises(errors.InvalidArgumentError, match=r"rules\[0\]"):
        _core.CheckpointLayout(mesh=reshard.Mesh(np.arange(2), ("x",)), topology=reshard.Topology.uniform(2, 1),
                               rules=["*"])
