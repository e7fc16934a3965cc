"""Whole-model pipelines: convert between a .safetensors file, a Hugging Face folder and a
reshard checkpoint (either way, or a checkpoint to a checkpoint in a new layout), merge
a PEFT LoRA adapter into its base model, and export / import between a training
framework's layout and Hugging Face files through a tensor map."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from . import _core
from ._dtypes import dtype_name

ConvertResult = _core.ConvertResult
MergeLoraSummary = _core.MergeLoraSummary
ExportResult = _core.ExportResult
ImportResult = _core.ImportResult

__all__ = ["ConvertResult", "ExportResult", "ImportResult", "MergeLoraSummary", "convert", "export", "import_model",
           "merge_lora"]


def _output_of(dst: str, mesh: Any) -> str:
    if mesh is not None:
        return "checkpoint"
    if dst.endswith(".safetensors") and not os.path.isdir(dst):
        return "safetensors"
    return "hf"


def convert(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    output: str | None = None,
    dtype: Any = None,
    max_shard_size: int = 5_000_000_000,
    replace: bool = False,
    mesh: _core.Mesh | None = None,
    topology: _core.Topology | None = None,
    rules: str | Sequence[tuple[str, _core.PartitionSpec]] | None = None,
    best_effort: str | None = None,
    transport: _core.Transport | None = None,
) -> ConvertResult:
    """Converts `src` (a .safetensors file, a Hugging Face folder or a checkpoint) to `dst`, as ``reshard convert``.

    `output` is 'safetensors', 'hf' or 'checkpoint'; by default a checkpoint
    when a `mesh` is given, a file when `dst` ends in ``.safetensors``, else a
    folder (split at `max_shard_size` bytes). `dtype` casts F32/F16/BF16 tensors.
    A checkpoint's tensors are laid out on `mesh` by `rules` (a rules file's
    text, or (glob, PartitionSpec) pairs; the first match wins, replicated if
    none) or by `best_effort` sharding over that axis. The output appears only
    when complete; an existing one is replaced only with `replace`. A folder
    made from a folder carries its non-weight files (config.json, its dtype keys
    following `dtype`, generation_config.json, tokenizer files); one made from a
    checkpoint gets the configs the checkpoint keeps. A folder output with no
    config.json to carry gives a ``UserWarning``.
    """
    dst = os.fspath(dst)
    output = output or _output_of(dst, mesh)
    if mesh is not None and topology is None:
        topology = _core.Topology.uniform(max(mesh.device_ids) + 1, 1 if transport is None else transport.size)
    if rules is not None and not isinstance(rules, str):
        rules = [(pattern, spec) for pattern, spec in rules]
    result = _core._convert(os.fspath(src), dst, output, None if dtype is None else dtype_name(dtype),
                            max_shard_size, replace, mesh, topology, rules, best_effort, transport)
    for message in result.warnings:
        warnings.warn(message, UserWarning, stacklevel=2)
    return result


def merge_lora(
    base: str | os.PathLike,
    adapter: str | os.PathLike,
    out: str | os.PathLike,
    dtype: Any = None,
    max_shard_size: int = 5_000_000_000,
    replace: bool = False,
    chunk_bytes: int = 8 << 20,
) -> MergeLoraSummary:
    """Merges the PEFT LoRA `adapter` folder into `base` (a Hugging Face folder or a .safetensors file), as
    ``reshard merge-lora`` and PEFT's ``merge_and_unload``: the folder `out`, with the base folder's
    non-weight files (config.json, generation_config.json, tokenizer files) carried beside the weights.

    Plain LoRA, rsLoRA, rank/alpha patterns, fan_in_fan_out, DoRA, LoRA on
    embeddings, ``lora_bias`` and ``modules_to_save`` are merged as PEFT
    defines them. Every adapter key must name a module of the base
    (MissingTensorError naming it otherwise); other adapter types and keys or
    configs PEFT would not merge raise UnsupportedError naming them. A base
    without config.json merges with a ``UserWarning`` (transformers cannot load
    the result). At most `chunk_bytes` of a weight is read and merged at a time.
    """
    summary = _core._merge_lora(os.fspath(base), os.fspath(adapter), os.fspath(out),
                                None if dtype is None else dtype_name(dtype), max_shard_size, replace, chunk_bytes)
    for message in summary.warnings:
        warnings.warn(message, UserWarning, stacklevel=2)
    return summary


def export(
    source: str | os.PathLike | Mapping[str, Any],
    out: str | os.PathLike,
    map: str,
    kind: str = "model",
    dtype: Any = None,
    max_shard_size: int = 5_000_000_000,
    base: str | os.PathLike | None = None,
    gather_to: int | None = None,
    replace: bool = False,
    hf_config: str | None = None,
    lora_config: str | None = None,
    transport: _core.Transport | None = None,
) -> ExportResult:
    """Exports a model in a training framework's layout to Hugging Face files, as ``reshard export``.

    `source` is a reshard checkpoint's path, or {name: ShardedArray} in memory.
    `map` is a preset name (``"levanter-llama"``), a map file's path or its JSON
    text (src/pipelines/tensor_map.md). `kind` is ``"model"`` (a Hugging Face
    folder), ``"adapter"`` (the LoRA factors as a PEFT adapter folder) or
    ``"merged"`` (every LoRA delta merged into its weight). Every process writes
    its share at the final offsets (or all stream to `gather_to`); the folder
    appears complete or not at all. `hf_config` / `lora_config` are the texts of
    config.json / adapter_config.json (a checkpoint's metadata gives them otherwise).
    """
    from .array import ShardedArray

    args = (os.fspath(out), map, kind, None if dtype is None else dtype_name(dtype), max_shard_size,
            None if base is None else os.fspath(base), gather_to, replace, hf_config, lora_config, transport)
    if isinstance(source, Mapping):
        for name, array in source.items():
            if not isinstance(array, ShardedArray):
                raise TypeError(f"{name!r} is a {type(array).__name__}, not a ShardedArray")
        return _core._export_arrays(list(source), [a._array for a in source.values()], *args)
    return _core._export_checkpoint(os.fspath(source), *args)


def import_model(
    hf_dir: str | os.PathLike,
    map: str,
    mesh: _core.Mesh,
    topology: _core.Topology | None = None,
    rules: str | Sequence[tuple[str, _core.PartitionSpec]] | None = None,
    best_effort: str | None = None,
    dtype: Any = None,
    sizes: Mapping[str, int] | None = None,
    checkpoint: str | os.PathLike | None = None,
    replace: bool = True,
    transport: _core.Transport | None = None,
) -> Any:
    """Imports a Hugging Face folder (or PEFT adapter) into the framework layout, as ``reshard import``:
    `map` run backwards, each tensor laid out on `mesh` by `rules` or `best_effort`.

    Returns {name: ShardedArray} (this process's part), or with `checkpoint` saves
    them there and returns the ImportResult. `sizes` gives axis sizes the shapes
    do not (config.json's are used otherwise).
    """
    from .array import ShardedArray

    if topology is None:
        topology = _core.Topology.uniform(max(mesh.device_ids) + 1, 1 if transport is None else transport.size)
    if rules is not None and not isinstance(rules, str):
        rules = [(pattern, spec) for pattern, spec in rules]
    common = (mesh, topology, rules, best_effort, None if dtype is None else dtype_name(dtype), dict(sizes or {}))
    if checkpoint is not None:
        return _core._import_checkpoint(os.fspath(hf_dir), os.fspath(checkpoint), map, *common, replace, transport)
    arrays, _ = _core._import_arrays(os.fspath(hf_dir), map, *common, transport)
    return {name: ShardedArray(a) for name, a in arrays}
