"""Orbax checkpoints into reshard: restore, export and convert without the training mesh.

    import reshard, reshard.orbax
    t = reshard.mpi.transport()                 # or None in one process
    mesh = reshard.Mesh(range(8), ("x",))
    arrays = reshard.orbax.restore("ckpt/1000/default", mesh, best_effort="x", transport=t)
    reshard.orbax.export("ckpt/1000/default", "hf", "levanter-llama", transport=t)

Reads an Orbax PyTree checkpoint (what ``ocp.StandardCheckpointer``,
``ocp.PyTreeCheckpointer`` and a ``CheckpointManager``'s step folders write:
zarr or zarr3 arrays, in folders or in an OCDBT database, compressed or not)
through TensorStore, the library Orbax writes with. Each process opens the
arrays it needs and reads only the boxes its devices hold (a box shared by
several of its devices once), into ShardedArrays on any layout and any number
of processes. Tree paths become tensor names as ``reshard.jax.save`` names
them (keys joined by dots: ``params.layers.0.w``), so the tensor maps of
``reshard.export`` (``levanter-llama``) apply.

`path` is an item folder (the one holding ``_METADATA``), or a step folder
with one item (``default``) or with `item` naming one. A folder that is not
Orbax's is a NotOrbaxCheckpointError, a save that never committed an
IncompleteCheckpointError, a dtype or array format reshard lacks an
UnsupportedDtypeError / UnsupportedDriverError, a name the tree lacks a
MissingTensorError. ``python -m reshard.orbax --help`` is the command line.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

try:
    import tensorstore as ts
except ImportError as e:  # pragma: no cover - exercised only without tensorstore
    raise ImportError("reshard.orbax needs tensorstore (pip install tensorstore); the rest of reshard works "
                      "without it") from e

from . import _core
from . import _orbax_layout as _layout
from . import checkpoint as _checkpoint
from . import pipelines as _pipelines
from ._dtypes import dtype_name
from .array import ShardedArray
from .errors import (FormatError, InvalidArgumentError, MissingTensorError, ReshardIOError, UnsupportedDriverError,
                     UnsupportedDtypeError, UnsupportedError)

__all__ = ["Inspection", "RestoreStats", "TensorInfo", "convert", "export", "inspect", "restore"]

_BYTES_READ = "/tensorstore/kvstore/file/bytes_read"


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One leaf of an Orbax checkpoint. Arrays have a shape, dtype, chunk shape and codec; other
    leaves (strings) only their value type."""

    name: str
    keys: tuple[str, ...]
    value_type: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    chunks: tuple[int, ...] | None = None
    codec: Any = None


@dataclasses.dataclass(frozen=True)
class Inspection:
    """What ``inspect`` finds: the item folder, its array format and each leaf."""

    path: str
    driver: str
    use_ocdbt: bool
    tensors: dict[str, TensorInfo]

    @property
    def format(self) -> str:
        """The array format in words: "zarr3 in OCDBT", "zarr folders"."""
        return f"{self.driver}{' in OCDBT' if self.use_ocdbt else ' folders'}"

    def __str__(self) -> str:
        lines = [f"{self.path}: Orbax PyTree, {len(self.tensors)} leaves, {self.format}"]
        for t in self.tensors.values():
            if t.shape is None:
                lines.append(f"  {t.name}  ({t.value_type}, not an array)")
            else:
                lines.append(f"  {t.name}  {t.dtype} {list(t.shape)} chunks {list(t.chunks or ())}  {t.codec}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class RestoreStats:
    """What one process's restore read: `bytes_read` from files (as TensorStore counts them, data and
    metadata), `boxes` read and `bytes_needed` (the elements its devices hold, each distinct box once)."""

    tensors: int
    boxes: int
    bytes_needed: int
    bytes_read: int


def _file_bytes_read() -> int:
    for metric in ts.experimental_collect_matching_metrics(_BYTES_READ):
        if metric["name"] == _BYTES_READ:
            return int(sum(v.get("value", 0) for v in metric["values"]))
    return 0


def _context() -> ts.Context:
    # No data cache (each box is read once, straight into its shard); OCDBT's b-tree nodes cached as Orbax does.
    return ts.Context({"cache_pool": {"total_bytes_limit": 0},
                       "cache_pool#ocdbt": {"total_bytes_limit": 100_000_000}})


def _error(name: str, e: Exception) -> Exception:
    text = str(e)
    if "NOT_FOUND" in text:
        return ReshardIOError(f"tensor {name!r}: its array data is missing: {text}")
    return FormatError(f"tensor {name!r}: TensorStore cannot read it: {text}")


def _check_driver(item: _layout.Item, leaf: _layout.Leaf) -> None:
    """Without OCDBT each array is a folder: its metadata file says its format before TensorStore opens it."""
    if item.use_ocdbt:
        return
    folder = item.folder / leaf.name
    expected = "zarr.json" if item.use_zarr3 else ".zarray"
    if (folder / expected).is_file():
        return
    if not folder.is_dir():
        raise ReshardIOError(f"tensor {leaf.name!r}: no array folder {folder}")
    known = {".zarray": "zarr", "zarr.json": "zarr3", "attributes.json": "n5", ".zattrs": "zarr"}
    found = sorted(known.get(p.name, p.name) for p in folder.iterdir() if p.name in known or p.name.endswith(".json"))
    raise UnsupportedDriverError(f"tensor {leaf.name!r}: {folder} is not a {item.driver} array (found {found}); "
                                 "reshard.orbax reads zarr and zarr3 arrays")


def _open(item: _layout.Item, leaves: Sequence[_layout.Leaf], context: ts.Context) -> list[ts.TensorStore]:
    for leaf in leaves:
        if not leaf.is_array:
            raise UnsupportedError(f"tensor {leaf.name!r} is an Orbax {leaf.value_type}, not an array")
        _check_driver(item, leaf)
    futures = [ts.open(item.spec(leaf), context=context, open=True, read=True) for leaf in leaves]
    stores = []
    for leaf, future in zip(leaves, futures):
        try:
            stores.append(future.result())
        except ValueError as e:
            raise _error(leaf.name, e) from e
    return stores


def _dtype_of(name: str, store: ts.TensorStore) -> str:
    try:
        return dtype_name(store.dtype.numpy_dtype)
    except (UnsupportedError, TypeError, ValueError) as e:
        raise UnsupportedDtypeError(f"tensor {name!r}: reshard has no dtype for TensorStore's {store.dtype.name}") \
            from e


def _item(path: Any, item: str | None) -> _layout.Item:
    return _layout.read_item(_layout.locate(path, item))


def inspect(path: str | os.PathLike, item: str | None = None) -> Inspection:
    """Every leaf of the checkpoint at `path`: tree path, shape, dtype, chunking and codec (metadata only)."""
    it = _item(path, item)
    arrays = [leaf for leaf in it.leaves if leaf.is_array]
    stores = dict(zip((x.name for x in arrays), _open(it, arrays, _context())))
    tensors = {}
    for leaf in it.leaves:
        store = stores.get(leaf.name)
        if store is None:
            tensors[leaf.name] = TensorInfo(leaf.name, leaf.keys, leaf.value_type)
            continue
        chunk = store.chunk_layout.read_chunk.shape
        tensors[leaf.name] = TensorInfo(leaf.name, leaf.keys, leaf.value_type, tuple(store.shape),
                                        store.dtype.name, tuple(chunk) if chunk is not None else (),
                                        store.schema.codec.to_json())
    return Inspection(str(it.folder), it.driver, it.use_ocdbt, tensors)


# ---- targets: reshard shardings, a mesh with rules, or JAX shardings ----------------------------------------

def _is_sharding(x: Any) -> bool:
    return isinstance(x, _core.NamedSharding)


def _flat(tree: Any, prefix: str, out: dict[str, Any]) -> Any:
    """{dotted name: sharding} of a nesting of dicts / lists / tuples, and its shape to rebuild it."""
    if _is_sharding(tree):
        out[prefix or "_"] = tree
        return None
    if isinstance(tree, Mapping):
        return (dict, [(k, _flat(v, f"{prefix}.{k}" if prefix else str(k), out)) for k, v in tree.items()])
    if isinstance(tree, (list, tuple)):
        return (type(tree), [(i, _flat(v, f"{prefix}.{i}" if prefix else str(i), out)) for i, v in enumerate(tree)])
    raise InvalidArgumentError(f"shardings: {prefix or 'the tree'} is a {type(tree).__name__}, not a "
                               "reshard.NamedSharding (nor a dict, list or tuple of them)")


def _rebuild(shape: Any, prefix: str, values: Mapping[str, Any]) -> Any:
    if shape is None:
        return values[prefix or "_"]
    kind, children = shape
    built = [(k, _rebuild(c, f"{prefix}.{k}" if prefix else str(k), values)) for k, c in children]
    return dict(built) if kind is dict else kind(v for _, v in built)


def _best_effort(shape: tuple[int, ...], mesh: _core.Mesh, axis: str) -> _core.NamedSharding:
    """reshard's best-effort sharding (as ``--best-effort``): the last dimension the axis divides, else replicated."""
    if axis not in mesh.axis_names:
        raise InvalidArgumentError(f"best_effort: the mesh has no axis {axis!r} (it has {list(mesh.axis_names)})")
    size = mesh.axis_sizes[list(mesh.axis_names).index(axis)]
    for d in reversed(range(len(shape))):
        if shape[d] % size == 0:
            return _core.NamedSharding(mesh, _core.PartitionSpec(*([None] * d + [axis])))
    return _core.NamedSharding(mesh, _core.PartitionSpec())


def _by_rules(name: str, shape: tuple[int, ...], mesh: _core.Mesh, rules: Sequence[tuple[str, Any]] | None,
              best_effort: str | None) -> _core.NamedSharding:
    for pattern, spec in rules or ():
        if fnmatch.fnmatchcase(name, pattern):
            if not isinstance(spec, _core.PartitionSpec):
                spec = _core.PartitionSpec(*spec)
            return _core.NamedSharding(mesh, spec)
    if best_effort is not None:
        return _best_effort(shape, mesh, best_effort)
    return _core.NamedSharding(mesh, _core.PartitionSpec())


def _job(transport: _core.Transport | None) -> tuple[int, int]:
    return (0, 1) if transport is None else (transport.rank, transport.size)


def _default_topology(shardings: Sequence[_core.NamedSharding], transport: _core.Transport | None) -> _core.Topology:
    devices = max((max(s.mesh.device_ids) for s in shardings), default=0) + 1
    size = _job(transport)[1]
    if devices % size:
        raise InvalidArgumentError(f"topology: {devices} devices do not spread evenly over {size} processes; "
                                   "pass a reshard.Topology")
    return _core.Topology.uniform(devices, size)


# ---- reading ------------------------------------------------------------------------------------------------

def _box_key(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape))


def _start_reads(store: ts.TensorStore, array: ShardedArray) -> tuple[list[Any], list[tuple[Any, Any]], int]:
    """Copies of each distinct box of this process's shards from `store`, started; the shards that
    repeat a box (replicas on this process) copy from the first once it is read."""
    first: dict[Any, np.ndarray] = {}
    repeats: list[tuple[Any, Any]] = []
    futures = []
    needed = 0
    for shard in array.shards:
        key = _box_key(shard.index, array.shape)
        if key in first:
            repeats.append((first[key], shard.data))
            continue
        first[key] = shard.data
        needed += shard.data.nbytes
        if shard.data.size == 0:
            continue
        source = store[tuple(slice(a, b) for a, b in key)]
        if key:
            source = source.translate_to[tuple(0 for _ in key)]
        futures.append(ts.array(shard.data, copy=False, write=True).write(source))
    return futures, repeats, needed


def _read(item: _layout.Item, names: Sequence[str], shardings: Any, topology: _core.Topology, process: int,
          expect: Mapping[str, Any] | None = None) -> tuple[dict[str, ShardedArray], RestoreStats]:
    """The arrays `names`, each laid out by its entry of `shardings` (or by ``shardings(name, shape)``,
    for layouts that depend on the stored shapes: each array is opened once either way)."""
    leaves = []
    for name in names:
        leaf = item.leaf(name)
        if leaf is None:
            raise MissingTensorError(f"{item.folder}: the Orbax tree has no path {name!r} (it has "
                                     f"{[x.name for x in item.leaves][:20]}{' ...' if len(item.leaves) > 20 else ''})")
        leaves.append(leaf)
    before = _file_bytes_read()
    stores = _open(item, leaves, _context())
    arrays, pending, repeats, boxes, needed = {}, [], [], 0, 0
    for i, (name, store) in enumerate(zip(names, stores)):
        dtype = _dtype_of(name, store)
        shape = tuple(store.shape)
        sharding = shardings(name, shape) if callable(shardings) else shardings[i]
        if expect is not None and name in expect:
            _check_expected(name, shape, dtype, expect[name])
        array = ShardedArray(_core._ShardedArray.allocate(shape, dtype, sharding, topology, process))
        futures, again, n = _start_reads(store, array)
        pending += [(name, f) for f in futures]
        repeats += again
        boxes += len(futures)
        needed += n
        arrays[name] = array
    for name, future in pending:
        try:
            future.result()
        except ValueError as e:
            raise _error(name, e) from e
    for source, target in repeats:
        target[...] = source
    return arrays, RestoreStats(len(names), boxes, needed, _file_bytes_read() - before)


def _check_expected(name: str, shape: tuple[int, ...], dtype: str, want: Any) -> None:
    want_shape = getattr(want, "shape", None)
    if want_shape is not None and tuple(want_shape) != shape:
        raise InvalidArgumentError(f"shardings: {name!r} asks for shape {tuple(want_shape)}, the checkpoint has {shape}")
    want_dtype = getattr(want, "dtype", None)
    if want_dtype is not None and dtype_name(want_dtype) != dtype:
        raise InvalidArgumentError(f"shardings: {name!r} asks for dtype {np.dtype(want_dtype)}, the checkpoint has "
                                   f"{dtype}")


def restore(path: str | os.PathLike, shardings: Any, transport: _core.Transport | None = None, *,
            rules: Sequence[tuple[str, Any]] | None = None, best_effort: str | None = None,
            topology: _core.Topology | None = None, item: str | None = None, with_stats: bool = False) -> Any:
    """The arrays of the Orbax checkpoint at `path`, each laid out as `shardings` says.

    `shardings` is one of:
    - a reshard ``Mesh``: every array of the tree, laid out on it by `rules`
      ((glob, PartitionSpec) pairs, the first match wins) or `best_effort`
      (shard the last dimension that axis divides), replicated otherwise;
      returns {tensor name: ShardedArray};
    - reshard ``NamedSharding``s: a dict (flat by dotted names, or nested) /
      list / tuple of them naming any subset of the tree, or one for every
      array; returns the same nesting of ShardedArrays;
    - JAX: a pytree whose leaves are jax shardings or carry one
      (``jax.ShapeDtypeStruct``, a jax.Array), named by tree path as
      ``reshard.jax.save`` names them; returns that pytree of jax.Arrays.
    `topology` (reshard's forms) defaults to the mesh's devices spread evenly
    over the transport's processes. Each process reads only what its devices
    hold; `with_stats` adds this process's RestoreStats. No data moves between
    processes (each reads the shared files), so `transport` only says which
    process this is.
    """
    it = _item(path, item)
    process, _ = _job(transport)
    if isinstance(shardings, _core.Mesh):
        mesh = shardings
        names = [leaf.name for leaf in it.leaves if leaf.is_array]
        topology = topology or _default_topology([_core.NamedSharding(mesh, _core.PartitionSpec())], transport)
        arrays, stats = _read(it, names, lambda n, shape: _by_rules(n, shape, mesh, rules, best_effort), topology,
                              process)
        return (arrays, stats) if with_stats else arrays
    if rules is not None or best_effort is not None:
        raise InvalidArgumentError("rules and best_effort lay out a Mesh; shardings is not one")
    if _is_sharding(shardings):
        names = [leaf.name for leaf in it.leaves if leaf.is_array]
        targets = [shardings] * len(names)
        topology = topology or _default_topology(targets, transport)
        arrays, stats = _read(it, names, targets, topology, process)
        return (arrays, stats) if with_stats else arrays
    if _has_reshard_leaves(shardings):
        flat: dict[str, _core.NamedSharding] = {}
        shape = _flat(shardings, "", flat)
        topology = topology or _default_topology(list(flat.values()), transport)
        arrays, stats = _read(it, list(flat), list(flat.values()), topology, process)
        restored = _rebuild(shape, "", arrays)
        return (restored, stats) if with_stats else restored
    restored, stats = _restore_jax(it, shardings, transport)
    return (restored, stats) if with_stats else restored


def _has_reshard_leaves(tree: Any) -> bool:
    if _is_sharding(tree):
        return True
    if isinstance(tree, Mapping):
        return any(_has_reshard_leaves(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return any(_has_reshard_leaves(v) for v in tree)
    return False


def _key_name(key: Any) -> str:
    for attr in ("key", "idx", "name"):  # DictKey, SequenceKey, GetAttrKey: the names reshard.jax.save gives
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _restore_jax(it: _layout.Item, shardings: Any, transport: _core.Transport | None) -> tuple[Any, RestoreStats]:
    try:
        import jax

        from . import jax as rjax
    except ImportError as e:
        raise InvalidArgumentError("shardings: neither reshard shardings, a reshard Mesh, nor (JAX is not "
                                   "installed) JAX shardings") from e

    def is_target(x: Any) -> bool:
        return isinstance(x, jax.sharding.Sharding) or isinstance(getattr(x, "sharding", None), jax.sharding.Sharding)

    pairs, treedef = jax.tree_util.tree_flatten_with_path(shardings, is_leaf=is_target)
    if not pairs or not all(is_target(leaf) for _, leaf in pairs):
        raise InvalidArgumentError("shardings: a reshard Mesh, reshard NamedShardings, or a pytree of jax "
                                   "shardings / ShapeDtypeStructs")
    process, size = _job(transport)
    if jax.process_count() != size or jax.process_index() != process:
        raise UnsupportedError(f"JAX runs {jax.process_count()} process(es), the transport {size}: restoring "
                               "into jax.Arrays across processes needs one multi-process JAX job whose process "
                               "indices are the transport's ranks")
    names = [".".join(_key_name(k) for k in path) or "_" for path, _ in pairs]
    leaves = [leaf for _, leaf in pairs]
    targets = [rjax.to_reshard(x if isinstance(x, jax.sharding.Sharding) else x.sharding) for x in leaves]
    expect = {n: x for n, x in zip(names, leaves) if not isinstance(x, jax.sharding.Sharding)}
    arrays, stats = _read(it, names, targets, rjax.topology(), process, expect)
    return jax.tree_util.tree_unflatten(treedef, [rjax.to_jax_array(arrays[n]) for n in names]), stats


# ---- export and convert: restore onto a layout over the job, then reshard's own pipelines --------------------

def _job_layout(transport: _core.Transport | None, mesh: _core.Mesh | None, topology: _core.Topology | None
                ) -> tuple[_core.Mesh, _core.Topology]:
    if mesh is not None:
        return mesh, topology
    size = _job(transport)[1]
    return _core.Mesh(list(range(size)), ("process",)), topology or _core.Topology.uniform(size, size)


def _spread(path: Any, transport: _core.Transport | None, mesh: _core.Mesh | None, rules: Any,
            best_effort: str | None, topology: _core.Topology | None, item: str | None) -> dict[str, ShardedArray]:
    """Every array of the checkpoint spread over the job: by default one device per process, each
    array's last dimension the process count divides split over them (replicated if none)."""
    if mesh is None and rules is None and best_effort is None:
        best_effort = "process"
    mesh, topology = _job_layout(transport, mesh, topology)
    return restore(path, mesh, transport, rules=rules, best_effort=best_effort, topology=topology, item=item)


def export(path: str | os.PathLike, out: str | os.PathLike, map: str, kind: str = "model", dtype: Any = None,
           transport: _core.Transport | None = None, *, mesh: _core.Mesh | None = None,
           rules: Sequence[tuple[str, Any]] | None = None, best_effort: str | None = None,
           topology: _core.Topology | None = None, item: str | None = None,
           **options: Any) -> _pipelines.ExportResult:
    """Exports the Orbax checkpoint at `path` to Hugging Face files through the tensor map `map`,
    as ``reshard.jax.export`` does a pytree: `kind` "model", "adapter" or "merged"; `options` are
    ``reshard.export``'s (max_shard_size, base, gather_to, replace, hf_config, lora_config).

    Collective over `transport`: every process reads its share of the
    checkpoint (by default each array split over the processes, see
    ``restore`` for `mesh`, `rules` and `best_effort`) and writes what it
    holds; nothing is gathered.
    """
    arrays = _spread(path, transport, mesh, rules, best_effort, topology, item)
    return _pipelines.export(arrays, out, map, kind=kind, dtype=dtype, transport=transport, **options)


def convert(path: str | os.PathLike, out: str | os.PathLike, transport: _core.Transport | None = None, *,
            mesh: _core.Mesh | None = None, rules: Sequence[tuple[str, Any]] | None = None,
            best_effort: str | None = None, topology: _core.Topology | None = None, item: str | None = None,
            metadata: Mapping[str, str] | None = None, replace: bool = False) -> _checkpoint.SaveStats:
    """Saves the Orbax checkpoint at `path` as the reshard checkpoint `out` (``reshard.restore_checkpoint``
    then restores it onto any layout). Laid out as ``export`` lays it; collective over `transport`."""
    arrays = _spread(path, transport, mesh, rules, best_effort, topology, item)
    return _checkpoint.save(out, arrays, metadata, replace, transport)


if __name__ == "__main__":
    import sys

    from ._orbax_cli import main

    sys.exit(main())
