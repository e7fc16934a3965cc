"""Whole-model pipelines: convert between a .safetensors file, a Hugging Face folder and a
reshard checkpoint (either way, or a checkpoint to a checkpoint in a new layout), merge
a PEFT LoRA adapter into its base model, and export / import between a training
framework's layout and Hugging Face files through a tensor map."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from . import _core
from ._dtypes import dtype_name
from .array import _mesh_topology
from .errors import ArgumentTypeError, InvalidArgumentError, MissingConfigWarning, ParseError
from ._paths import fspath as _fspath


@dataclasses.dataclass(frozen=True)
class _TensorSource:
    """Tensors an export reads through a function (an Orbax checkpoint through TensorStore):
    `specs` (name, dtype name, shape) of each, and ``read(index, starts, stops, buffer)`` filling
    the writable memoryview `buffer` (valid during the call only) with that box of tensor `index`,
    dense and row-major. Every process may be asked for any box; it is called from the export's
    threads, several at once."""

    specs: list[tuple[str, str, tuple[int, ...]]]
    read: Callable[[int, Sequence[int], Sequence[int], memoryview], None]

ConvertResult = _core.ConvertResult
MergeLoraResult = _core.MergeLoraResult
ExportResult = _core.ExportResult
ExportTimes = _core.ExportTimes
ImportResult = _core.ImportResult

__all__ = ["ConvertResult", "ExportResult", "ExportTimes", "ImportResult", "MergeLoraResult", "convert", "export",
           "import_model", "merge_lora"]


def _byte_size(value: int | str, argument: str) -> int:
    """A byte count given as an int or as the command line's size text ("100KB", "5GB", "1.5GiB")."""
    if isinstance(value, str):
        try:
            return _core._parse_byte_size(value)
        except ParseError as e:
            raise ParseError(f"{argument}: {e}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{argument}: bytes as an int or a size such as '5GB', not {value!r}")
    if value < 0:
        raise InvalidArgumentError(f"{argument}: {value} bytes is negative")
    return value


def convert(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    output: str | None = None,
    dtype: Any = None,
    max_shard_size: int | str = _core.DEFAULT_MAX_SHARD_SIZE,
    replace: bool = False,
    mesh: _core.Mesh | None = None,
    topology: _core.Topology | None = None,
    rules: str | Sequence[tuple[str, _core.PartitionSpec]] | None = None,
    best_effort: str | None = None,
    transport: _core.Transport | None = None,
    strict: bool = False,
) -> ConvertResult:
    """Converts `src` (a .safetensors file, a Hugging Face folder or a checkpoint) to `dst`, as ``reshard convert``.

    `output` is 'safetensors', 'hf' or 'checkpoint'; by default a checkpoint
    when a `mesh` is given, a file when `dst` ends in ``.safetensors``, else a
    folder (split at `max_shard_size`: bytes, or a size as the command line
    takes it, "5GB", "500MB", "1.5GiB"). `dtype` casts F32/F16/BF16 tensors.
    A checkpoint's tensors are laid out on `mesh` by `rules` (a rules file's
    text, or (glob, PartitionSpec) pairs; the first match wins, replicated if
    none; a rule whose spec is longer than a tensor's rank passes to the next,
    unless `strict`, which makes it a RankError), the tensors no rule lays out
    by `best_effort` sharding over that axis where given. The output appears only when complete; an existing one is
    replaced only with `replace`. A folder made from a folder carries its
    non-weight files (config.json, its dtype keys following `dtype`,
    generation_config.json, tokenizer files); one made from a checkpoint gets
    the configs the checkpoint keeps. A folder output with no config.json to
    carry gives a ``UserWarning``.
    """
    dst = _fspath(dst, "dst")
    if mesh is not None and topology is None:
        topology = _mesh_topology(mesh, transport)
    if rules is not None and not isinstance(rules, str):
        rules = list(rules)  # each (pattern, spec) pair is checked, by index, in the extension
    layout = None
    if mesh is not None:
        layout = _core.CheckpointLayout(mesh=mesh, topology=topology, rules=rules, best_effort_axis=best_effort,
                                        strict=strict)
    elif rules is not None or best_effort is not None:
        raise InvalidArgumentError("rules and best_effort lay out a checkpoint output on a mesh: pass mesh= too")
    options = _core.ConvertOptions(output=_core._convert_output_for(dst, mesh is not None) if output is None else output,
                                   dtype=None if dtype is None else dtype_name(dtype),
                                   max_shard_size=_byte_size(max_shard_size, "max_shard_size"), replace=replace,
                                   layout=layout)
    result = _core._convert(_fspath(src, "src"), dst, options, transport)
    for message in result.warnings:
        warnings.warn(message, MissingConfigWarning, stacklevel=2)
    return result


def merge_lora(
    base: str | os.PathLike,
    adapter: str | os.PathLike,
    out: str | os.PathLike,
    *,
    dtype: Any = None,
    max_shard_size: int | str = _core.DEFAULT_MAX_SHARD_SIZE,
    replace: bool = False,
    block_bytes: int = _core.DEFAULT_MERGE_BLOCK_BYTES,
    threads: int = 0,
    chunk_bytes: int | None = None,
) -> MergeLoraResult:
    """Merges the PEFT LoRA `adapter` folder into `base` (a Hugging Face folder or a .safetensors file), as
    ``reshard merge-lora`` and PEFT's ``merge_and_unload``: the folder `out`, with the base folder's
    non-weight files (config.json, generation_config.json, tokenizer files) carried beside the weights.

    Plain LoRA, rsLoRA, rank/alpha patterns, fan_in_fan_out, DoRA, LoRA on
    embeddings, ``lora_bias`` and ``modules_to_save`` are merged as PEFT
    defines them. Every adapter key must name a module of the base
    (MissingTensorError naming it otherwise); other adapter types and keys or
    configs PEFT would not merge raise UnsupportedError naming them. A base
    without config.json merges with a ``UserWarning`` (transformers cannot load
    the result). At most `block_bytes` of a weight is read and merged at a time, over `threads` threads
    (0: every core), while the next block is read and the last one written (`chunk_bytes` is
    `block_bytes`' old name, deprecated and removed in the next release).
    """
    if chunk_bytes is not None:
        if block_bytes != _core.DEFAULT_MERGE_BLOCK_BYTES:
            raise InvalidArgumentError("chunk_bytes: the old name of block_bytes; give block_bytes alone")
        warnings.warn("merge_lora(chunk_bytes=) is now block_bytes= (as export's)", DeprecationWarning, stacklevel=2)
        block_bytes = chunk_bytes
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise ArgumentTypeError(f"threads: a count as an int, not {threads!r}")
    if threads < 0:
        raise InvalidArgumentError(f"threads: {threads} is negative (0 means every core)")
    options = _core.MergeLoraOptions(dtype=None if dtype is None else dtype_name(dtype),
                                     max_shard_size=_byte_size(max_shard_size, "max_shard_size"), replace=replace,
                                     block_bytes=block_bytes, threads=threads)
    summary = _core._merge_lora(_fspath(base, "base"), _fspath(adapter, "adapter"), _fspath(out, "out"), options)
    for message in summary.warnings:
        warnings.warn(message, MissingConfigWarning, stacklevel=2)
    return summary


ExportKind = Literal["model", "adapter", "merged"]


def _config_text(config: str | Mapping[str, Any] | None, argument: str) -> str | None:
    """A config given as a dict (written as JSON) or as its JSON text."""
    if config is None or isinstance(config, str):
        return config
    if isinstance(config, Mapping):
        try:
            return json.dumps(config)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"{argument}: not JSON-serializable: {e}") from None
    raise ArgumentTypeError(f"{argument}: a dict or its JSON text, not a {type(config).__name__}")


def export(
    source: str | os.PathLike | Mapping[str, Any],
    out: str | os.PathLike,
    tensor_map: str,
    *,
    kind: ExportKind = "model",
    dtype: Any = None,
    max_shard_size: int | str = _core.DEFAULT_MAX_SHARD_SIZE,
    base: str | os.PathLike | None = None,
    gather_to: int | None = None,
    replace: bool = False,
    hf_config: str | Mapping[str, Any] | None = None,
    lora_config: str | Mapping[str, Any] | None = None,
    transport: _core.Transport | None = None,
    part_size: int | str | None = None,
    parts_in_flight: int = 4,
) -> ExportResult:
    """Exports a model in a training framework's layout to Hugging Face files, as ``reshard export``.

    `source` is a reshard checkpoint's path, or {name: ShardedArray} in memory.
    `tensor_map` is a preset name (``"levanter-llama"``), a map file's path or its JSON
    text (docs/tensor-map.md). `kind` is ``"model"`` (a Hugging Face
    folder), ``"adapter"`` (the map's outputs under ``base_model.model.`` as a
    PEFT adapter folder) or ``"merged"`` (the adapter merged in as
    :func:`merge_lora` merges it: plain LoRA, DoRA, LoRA on embeddings,
    ``lora_bias`` and ``modules_to_save``). Every process writes
    its share at the final offsets (or all stream to `gather_to`); the folder
    appears complete or not at all. `hf_config` / `lora_config` are
    config.json / adapter_config.json, as dicts or their JSON text (a
    checkpoint's metadata gives them otherwise). A model folder written without
    any config.json warns (MissingConfigWarning): transformers cannot load it
    without one. ``"adapter"`` and ``"merged"`` need `lora_config` (r, lora_alpha)
    or a checkpoint that holds it. `base` is a Hugging Face folder (local or in a
    store): with ``"adapter"``, the model whose modules the adapter's keys must
    name; with ``"merged"`` and a source of LoRA factors alone (a LoRA run's
    checkpoint), the weights they merge into, each process reading only the
    base's bytes of its blocks, and the config.json written unless `hf_config`
    is given. A source with weights of its own beside `base` is refused.

    `out` may be ``s3://BUCKET/PREFIX`` or ``gs://BUCKET/PREFIX`` (credentials
    and endpoints from the environment, as the stores' own tools read them:
    ``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``STORAGE_EMULATOR_HOST``).
    Each weight file is then one multipart upload that every process fills
    with the parts it produced, of `part_size` bytes (an int or a size such as
    "64MiB"; None: the store's default, 64 MiB; S3 takes 5 MiB to 5 GiB), at
    most `parts_in_flight` at once per process (its memory is about that many
    parts). A failed export aborts its uploads; a store's refusal is a
    ``reshard.errors.StorageError`` subclass (AccessDeniedError, ...).
    """
    from .array import ShardedArray

    hf_text, lora_text = _config_text(hf_config, "hf_config"), _config_text(lora_config, "lora_config")
    part_bytes = 0 if part_size is None else _byte_size(part_size, "part_size")
    if isinstance(parts_in_flight, bool) or not isinstance(parts_in_flight, int):
        raise ArgumentTypeError(f"parts_in_flight: a count as an int, not {parts_in_flight!r}")
    if not 1 <= parts_in_flight < 2**32:
        raise InvalidArgumentError(f"parts_in_flight: {parts_in_flight} is not a count of parts (1 or more)")
    try:
        options = _core.ExportOptions(kind=kind, dtype=None if dtype is None else dtype_name(dtype),
                                      max_shard_size=_byte_size(max_shard_size, "max_shard_size"),
                                      base=None if base is None else _fspath(base, "base"), gather_to=gather_to,
                                      replace=replace, hf_config_json=hf_text, lora_config_json=lora_text,
                                      part_bytes=part_bytes, parts_in_flight=parts_in_flight)
        if isinstance(source, Mapping):
            for name, array in source.items():
                if not isinstance(array, ShardedArray):
                    raise ArgumentTypeError(f"source[{name!r}] is a {type(array).__name__}, not a ShardedArray")
            result = _core._export_arrays(list(source), [a._array for a in source.values()], _fspath(out, "out"),
                                          tensor_map, options, transport)
        elif isinstance(source, _TensorSource):
            result = _core._export_source(source.specs, source.read, _fspath(out, "out"), tensor_map, options=options,
                                          transport=transport)
        else:
            result = _core._export_checkpoint(_fspath(source, "source"), _fspath(out, "out"), tensor_map, options,
                                              transport)
    except InvalidArgumentError as e:
        # The library names the checkpoint's metadata key; a Python caller passes the argument.
        if lora_config is None and e.kind == "no_lora_config":
            where = "" if isinstance(source, (Mapping, _TensorSource)) else f" (and {_fspath(source, 'source')} holds none in its metadata)"
            raise InvalidArgumentError(f"kind={kind!r} needs the LoRA config (r, lora_alpha): pass lora_config=, "
                                       f"adapter_config.json as a dict or its text{where}") from None
        # The store's limits on part sizes, said of the argument that chose one.
        if part_size is not None and e.kind == "part_size_out_of_range":
            raise InvalidArgumentError(f"part_size={part_size!r}: {e}") from None
        raise
    if kind != "adapter" and not result.wrote_config_json:
        # Neither hf_config nor the base model nor the checkpoint's metadata gave one.
        warnings.warn(f"{_fspath(out, 'out')}: no config.json written (pass hf_config=, config.json as a dict or its "
                      "text): transformers cannot load the folder without one", MissingConfigWarning, stacklevel=2)
    return result


def _import_args(mesh: _core.Mesh, topology: _core.Topology | None, rules: Any, best_effort: str | None, strict: bool,
                 dtype: Any, sizes: Mapping[str, int] | None, base: str | os.PathLike | None, replace: bool,
                 transport: _core.Transport | None) -> tuple[_core.CheckpointLayout, _core.ImportOptions]:
    if topology is None:
        topology = _mesh_topology(mesh, transport)
    if rules is not None and not isinstance(rules, str):
        rules = list(rules)  # each (pattern, spec) pair is checked, by index, in the extension
    layout = _core.CheckpointLayout(mesh=mesh, topology=topology, rules=rules, best_effort_axis=best_effort,
                                    strict=strict)
    options = _core.ImportOptions(dtype=None if dtype is None else dtype_name(dtype), sizes=dict(sizes or {}),
                                  base=None if base is None else _fspath(base, "base"), replace=replace)
    return layout, options


def import_model(
    hf_dir: str | os.PathLike,
    tensor_map: str,
    mesh: _core.Mesh,
    topology: _core.Topology | None = None,
    *,
    rules: str | Sequence[tuple[str, _core.PartitionSpec]] | None = None,
    best_effort: str | None = None,
    dtype: Any = None,
    sizes: Mapping[str, int] | None = None,
    transport: _core.Transport | None = None,
    strict: bool = False,
    base: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Imports a Hugging Face folder (or PEFT adapter) into the framework layout, as ``reshard import``:
    `tensor_map` run backwards, each tensor laid out on `mesh` by `rules`, then `best_effort`.

    `rules` are (glob, PartitionSpec) pairs (JAX's ``P`` too) or a rules file's
    text: the first matching rule whose spec fits the tensor's rank lays it out,
    else `best_effort` sharding over that axis where given, else it is
    replicated (so ``[("*", P(None, "model"))]`` alone leaves 1-D norms
    replicated); with ``strict=True`` a matching rule that does not fit is a
    RankError naming the tensor.

    Returns {name: ShardedArray} (this process's part); :func:`import_checkpoint`
    saves them as a checkpoint instead. `sizes` gives axis sizes the shapes
    do not (config.json's are used otherwise). A PEFT adapter folder alone takes
    them from its base model's config.json: `base` (the base model's folder), else
    adapter_config.json's ``base_model_name_or_path`` when that is a local folder.
    """
    from .array import ShardedArray

    layout, options = _import_args(mesh, topology, rules, best_effort, strict, dtype, sizes, base, True, transport)
    arrays, _ = _core._import_arrays(_fspath(hf_dir, "hf_dir"), tensor_map, layout, options, transport)
    return {name: ShardedArray(a) for name, a in arrays}


def import_checkpoint(
    hf_dir: str | os.PathLike,
    checkpoint: str | os.PathLike,
    tensor_map: str,
    mesh: _core.Mesh,
    topology: _core.Topology | None = None,
    *,
    rules: str | Sequence[tuple[str, _core.PartitionSpec]] | None = None,
    best_effort: str | None = None,
    dtype: Any = None,
    sizes: Mapping[str, int] | None = None,
    replace: bool = False,
    transport: _core.Transport | None = None,
    strict: bool = False,
    base: str | os.PathLike | None = None,
) -> Any:
    """:func:`import_model`, saved as the reshard checkpoint `checkpoint` (as ``reshard import``
    writes one); returns the ImportResult. The checkpoint appears complete or not at all."""
    layout, options = _import_args(mesh, topology, rules, best_effort, strict, dtype, sizes, base, replace, transport)
    return _core._import_checkpoint(_fspath(hf_dir, "hf_dir"), _fspath(checkpoint, "checkpoint"), tensor_map, layout,
                                    options, transport)
