"""The pipelines' options as _core classes (ConvertOptions, CheckpointLayout,
MergeLoraOptions): made by keyword only, each field read back, passed whole."""

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
], ids=["ConvertOptions", "MergeLoraOptions", "CheckpointLayout"])
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


def test_a_bad_value_is_the_library_error_naming_it():
    with pytest.raises(errors.InvalidArgumentError, match="unknown output 'folder'"):
        _core.ConvertOptions(output="folder")
    with pytest.raises(errors.InvalidArgumentError, match=r"rules\[0\]"):
        _core.CheckpointLayout(mesh=reshard.Mesh(np.arange(2), ("x",)), topology=reshard.Topology.uniform(2, 1),
                               rules=["*"])
