"""Whole-model pipelines: convert between a .safetensors file, a Hugging Face folder and a
reshard checkpoint (either way, or a checkpoint to a checkpoint in a new layout), and merge
a PEFT LoRA adapter into its base model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from . import _core
from ._dtypes import dtype_name

ConvertResult = _core.ConvertResult
MergeLoraSummary = _core.MergeLoraSummary

__all__ = ["ConvertResult", "MergeLoraSummary", "convert", "merge_lora"]


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
    when complete; an existing one is replaced only with `replace`.
    """
    dst = os.fspath(dst)
    output = output or _output_of(dst, mesh)
    if mesh is not None and topology is None:
        topology = _core.Topology.uniform(max(mesh.device_ids) + 1, 1 if transport is None else transport.size)
    if rules is not None and not isinstance(rules, str):
        rules = [(pattern, spec) for pattern, spec in rules]
    return _core._convert(os.fspath(src), dst, output, None if dtype is None else dtype_name(dtype), max_shard_size,
                          replace, mesh, topology, rules, best_effort, transport)


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
    ``reshard merge-lora``: the folder `out`, with config.json and generation_config.json copied.

    Every adapter key must name a module of the base (MissingTensorError naming
    it otherwise); at most `chunk_bytes` of a weight is read and merged at a time.
    """
    return _core._merge_lora(os.fspath(base), os.fspath(adapter), os.fspath(out),
                             None if dtype is None else dtype_name(dtype), max_shard_size, replace, chunk_bytes)
