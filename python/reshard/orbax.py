"""Orbax, Levanter and JAX checkpoints into reshard: restore, export and convert without the training mesh.

    import reshard, reshard.orbax
    t = reshard.mpi.transport()                 # or None in one process
    mesh = reshard.Mesh(range(8), ("x",))
    arrays = reshard.orbax.restore("ckpt/1000/default", mesh, best_effort="x", transport=t)
    reshard.orbax.export("ckpt/1000/default", "hf", "levanter-llama", transport=t)

Reads an Orbax PyTree checkpoint (what ``ocp.StandardCheckpointer``,
``ocp.PyTreeCheckpointer`` and a ``CheckpointManager``'s step folders write:
zarr or zarr3 arrays, in folders or in an OCDBT database, compressed or not),
a Levanter checkpoint's step folder (its current layout, every leaf a zarr3
array in one OCDBT database, and its previous one, a zarr folder per leaf) or
any folder JAX's ``GlobalAsyncCheckpointManager`` wrote, through TensorStore,
the library they all write with; the kind is recognised from the folder. Each
process opens the arrays it needs and reads only the boxes its devices hold (a box shared by
several of its devices once), into ShardedArrays on any layout and any number
of processes. Tree paths become tensor names as ``reshard.jax.save`` names
them (keys joined by dots: ``params.layers.0.w``), so the tensor maps of
``reshard.export`` (``levanter-llama``) apply.

`subtree` reads the leaves under one key path only, that prefix taken off
their names: by default ``model`` for a Levanter checkpoint (its
``opt_state``, ``step`` and ``training_key`` are left alone; pass
``"train_state.model"`` for a state nested deeper, ``""`` for the whole tree)
and the whole tree otherwise.

`path` is an Orbax item folder (the one holding ``_METADATA``), or a step folder
with one item (``default``) or with `item` naming one, or a Levanter or JAX
checkpoint folder: local, or
``s3://BUCKET/KEY`` or ``gs://BUCKET/KEY`` (read through TensorStore's s3
and gcs drivers, with credentials and endpoints from the environment as the
stores' tools read them: ``AWS_*``; Application Default Credentials and
``STORAGE_EMULATOR_HOST``). A store's refusal is a ``StorageError``
subclass (``AccessDeniedError``, ``ObjectNotFoundError``, ...). A folder that
is none of these kinds is a NotOrbaxCheckpointError saying what each needs, a
save that never committed an IncompleteCheckpointError, a dtype or array format
reshard lacks an UnsupportedDtypeError / UnsupportedDriverError, a name the tree
lacks a MissingTensorError (a subtree without leaves too). ``python -m
reshard.orbax --help`` is the command line.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

try:
    import tensorstore  # noqa: F401 - the reading modules below need it
except ImportError as e:  # pragma: no cover - exercised only without tensorstore
    raise ImportError("reshard.orbax needs tensorstore (pip install tensorstore); the rest of reshard works "
                      "without it") from e

from . import _core, _job_transport, _paths, _sources, _store_paths
from . import _orbax_layout as _layout
from . import _orbax_read as _read
from . import _orbax_source as _source
from . import _orbax_targets as _targets
from . import checkpoint as _checkpoint
from . import pipelines as _pipelines
from ._orbax_read import RestoreResult
from .array import ShardedArray, _default_topology, _mesh_topology
from .errors import InvalidArgumentError

__all__ = ["Inspection", "RestoreResult", "TensorInfo", "convert", "export", "inspect", "restore", "restore_with_result"]


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
    """What ``inspect`` finds: the checkpoint folder, its kind ("orbax", "levanter" or "jax"), its array
    format (of most arrays, for Levanter's and JAX's), a Levanter checkpoint's step, and each leaf."""

    path: str
    driver: str
    use_ocdbt: bool
    tensors: dict[str, TensorInfo]
    kind: str = "orbax"
    step: int | None = None

    @property
    def format(self) -> str:
        """The array format in words: "zarr3 in OCDBT", "zarr folders"."""
        return f"{self.driver}{' in OCDBT' if self.use_ocdbt else ' folders'}"

    def __str__(self) -> str:
        what = {"orbax": "Orbax PyTree", "levanter": f"Levanter checkpoint, step {self.step}",
                "jax": "JAX GlobalAsyncCheckpointManager arrays"}[self.kind]
        lines = [f"{self.path}: {what}, {len(self.tensors)} leaves, {self.format}"]
        for t in self.tensors.values():
            if t.shape is None:
                lines.append(f"  {t.name}  ({t.value_type}, not an array)")
            else:
                lines.append(f"  {t.name}  {t.dtype} {list(t.shape)} chunks {list(t.chunks or ())}  {t.codec}")
        return "\n".join(lines)


def _item(path: Any, item: str | None, subtree: str | None) -> _layout.Item:
    return _sources.select(_sources.open_item(path, item), subtree)


def inspect(path: str | os.PathLike, item: str | None = None, subtree: str = "") -> Inspection:
    """Every leaf of the checkpoint at `path` (of `subtree` only, where given: by default the whole tree,
    a Levanter checkpoint's ``opt_state`` too): tree path, shape, dtype, chunking and codec (metadata only)."""
    it = _item(path, item, subtree)
    arrays = [leaf for leaf in it.leaves if leaf.is_array]
    stores = dict(zip((x.name for x in arrays), _read.open_arrays(it, arrays, _read.context())))
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
    return Inspection(str(it.folder), it.driver, it.use_ocdbt, tensors, it.kind, it.step)


def restore(path: str | os.PathLike, shardings: Any, *, transport: _core.Transport | None = None,
            rules: str | Sequence[tuple[str, Any]] | None = None, best_effort: str | None = None,
            topology: _core.Topology | None = None, item: str | None = None, subtree: str | None = None) -> Any:
    """The arrays of the checkpoint at `path`, each laid out as `shardings` says.

    `shardings` is one of:
    - a reshard ``Mesh``: every array of the tree (``inspect`` lists the leaves
      that are not arrays, such as strings, which are left out), laid out on it as
      ``reshard.convert`` lays out a checkpoint: by `rules` ((glob, PartitionSpec)
      pairs or a rules file's text; the first matching rule whose spec fits the
      array's rank wins), then for names no rule lays out by `best_effort`
      (shard the last dimension that axis divides), replicated otherwise;
      returns {tensor name: ShardedArray};
    - reshard ``NamedSharding``s: a dict (flat by dotted names, or nested) /
      list / tuple of them naming any subset of the tree (returns the same
      nesting of ShardedArrays), or one for every array (returns {name: ShardedArray});
    - JAX: a pytree whose leaves are jax shardings or carry one
      (``jax.ShapeDtypeStruct``, a jax.Array), named by tree path as
      ``reshard.jax.save`` names them; returns that pytree of jax.Arrays.
    `topology` (reshard's forms) defaults to the mesh's devices spread evenly
    over the transport's processes. Each process reads only what its devices
    hold (``restore_with_result`` also says what it read). No data moves between
    processes (each reads the shared files), so `transport` only says which
    process this is.
    """
    transport = _job_transport.for_jax(transport)
    return restore_with_result(path, shardings, transport=transport, rules=rules, best_effort=best_effort,
                               topology=topology, item=item, subtree=subtree)[0]


def restore_with_result(path: str | os.PathLike, shardings: Any, *, transport: _core.Transport | None = None,
                        rules: str | Sequence[tuple[str, Any]] | None = None, best_effort: str | None = None,
                        topology: _core.Topology | None = None, item: str | None = None,
                        subtree: str | None = None) -> tuple[Any, RestoreResult]:
    """``restore``'s arrays, and this process's RestoreResult: what it read."""
    transport = _job_transport.for_jax(transport)
    it = _item(path, item, subtree)
    process, _ = _targets.job(transport)
    if isinstance(shardings, _core.Mesh):
        mesh = shardings
        names = [leaf.name for leaf in it.leaves if leaf.is_array]
        topology = topology or _mesh_topology(mesh, transport)
        layout = _targets.layout(mesh, topology, rules, best_effort)
        return _read.read(it, names, lambda n, shape, _: layout.sharding_for(n, shape), topology, process)
    if rules is not None or best_effort is not None:
        raise InvalidArgumentError("rules and best_effort lay out a Mesh; shardings is not one")
    if _targets.is_sharding(shardings):
        names = [leaf.name for leaf in it.leaves if leaf.is_array]
        targets = [shardings] * len(names)
        topology = topology or _default_topology(targets, transport)
        return _read.read(it, names, targets, topology, process)
    if _targets.has_shardings(shardings):
        flat: dict[str, _core.NamedSharding] = {}
        shape = _targets.flatten(shardings, "", flat)
        topology = topology or _default_topology(list(flat.values()), transport)
        arrays, stats = _read.read(it, list(flat), list(flat.values()), topology, process)
        return _targets.rebuild(shape, "", arrays), stats
    return _restore_jax(it, shardings, transport)


def _restore_jax(it: _layout.Item, shardings: Any, transport: _core.Transport | None) -> tuple[Any, RestoreResult]:
    try:
        import jax

        from . import jax as rjax
    except ImportError as e:
        raise InvalidArgumentError("shardings: neither reshard shardings, a reshard Mesh, nor (JAX is not "
                                   "installed) JAX shardings") from e

    # Named as reshard.jax names a tree (keys joined by dots), and on JAX's job as it checks it.
    names, leaves, treedef = rjax._named_leaves(shardings, is_leaf=rjax._is_target)
    if not leaves or not all(rjax._is_target(leaf) for leaf in leaves):
        raise InvalidArgumentError("shardings: a reshard Mesh, reshard NamedShardings, or a pytree of jax "
                                   "shardings / ShapeDtypeStructs")
    topology = rjax._job_topology(transport)
    process, _ = _targets.job(transport)
    targets = [rjax.to_reshard(rjax._sharding_of(x)) for x in leaves]
    expect = {n: x for n, x in zip(names, leaves) if not isinstance(x, jax.sharding.Sharding)}
    arrays, stats = _read.read(it, names, targets, topology, process, expect)
    return jax.tree_util.tree_unflatten(treedef, [rjax.to_jax_array(arrays[n]) for n in names]), stats


def _job_layout(transport: _core.Transport | None, mesh: _core.Mesh | None, topology: _core.Topology | None
                ) -> tuple[_core.Mesh, _core.Topology]:
    if mesh is not None:
        return mesh, topology
    size = _targets.job(transport)[1]
    return _core.Mesh(list(range(size)), ("process",)), topology or _core.Topology.uniform(size, size)


def _spread(path: Any, transport: _core.Transport | None, mesh: _core.Mesh | None, rules: Any,
            best_effort: str | None, topology: _core.Topology | None, item: str | None,
            subtree: str | None) -> dict[str, ShardedArray]:
    """Every array of the checkpoint spread over the job: by default one device per process, each
    array split over them along the last dimension whose stored chunks the split does not cut, else
    the last dimension the process count divides (replicated if none)."""
    by_default = mesh is None and rules is None and best_effort is None
    if by_default:
        best_effort = "process"
    mesh, topology = _job_layout(transport, mesh, topology)
    if by_default:
        # Split where the stored chunks allow, so that each process reads only its own chunks.
        it = _item(path, item, subtree)
        names = [leaf.name for leaf in it.leaves if leaf.is_array]
        fallback = _targets.layout(mesh, topology, None, best_effort)
        arrays, _ = _read.read(it, names,
                               lambda n, shape, chunks: _targets.chunk_aligned(n, shape, chunks, mesh, fallback),
                               topology, _targets.job(transport)[0])
        return arrays
    return restore(path, mesh, transport=transport, rules=rules, best_effort=best_effort, topology=topology,
                   item=item, subtree=subtree)


def export(path: str | os.PathLike, out: str | os.PathLike, tensor_map: str, *, kind: str = "model", dtype: Any = None,
           transport: _core.Transport | None = None, mesh: _core.Mesh | None = None,
           rules: str | Sequence[tuple[str, Any]] | None = None, best_effort: str | None = None,
           topology: _core.Topology | None = None, item: str | None = None, subtree: str | None = None,
           max_shard_size: int | str = _core.DEFAULT_MAX_SHARD_SIZE, part_size: int | str | None = None,
           **options: Any) -> _pipelines.ExportResult:
    """Exports the checkpoint at `path` to Hugging Face files through the tensor map `tensor_map`,
    as ``reshard.jax.export`` does a pytree: `kind` "model", "adapter" or "merged"; `options` are
    ``reshard.export``'s (base, gather_to, replace, hf_config, lora_config, parts_in_flight), and so are
    `max_shard_size` and `part_size`: bytes, or a size as the command line takes it ("5GB", "64MiB"),
    checked before anything is read. `out` may be in a store too (``s3://``, ``gs://``).

    A LoRA run's checkpoint holds only the factors it trained: ``kind="adapter"``
    exports them alone, and ``kind="merged"`` with `base` (a Hugging Face
    folder, local or in a store) merges them into the base model's weights,
    each process reading only the base's bytes of the blocks it produces, with
    merge-lora's arithmetic (its config.json is the merged folder's unless
    `hf_config` is given).

    Collective over `transport`: every process reads, block by block, the
    parts of the checkpoint it produces and writes them (holding only the
    blocks in flight); nothing is gathered. With `mesh`, `rules`,
    `best_effort` or `topology` (see ``restore``), each process instead first
    reads its whole share of the checkpoint, laid out so.
    """
    transport = _job_transport.for_jax(transport)
    _store_paths.parse(out, "out")  # a scheme reshard does not write, refused before anything is read
    options["max_shard_size"] = _pipelines._byte_size(max_shard_size, "max_shard_size")
    if part_size is not None:
        options["part_size"] = _pipelines._byte_size(part_size, "part_size")
    # The reading is each process's own: agree on it, so that one process's failed read
    # fails every process at once instead of leaving them in the export until the timeout.
    if mesh is None and rules is None and best_effort is None and topology is None:
        # Each block read where it is produced: a process holds only the blocks in flight.
        source = _core._agreed(transport, lambda: _source.open_source(_item(path, item, subtree)),
                               f"reading {path}")
        return _pipelines.export(source, out, tensor_map, kind=kind, dtype=dtype, transport=transport, **options)
    # A layout asked for spreads the checkpoint as asked: each process reads its whole share first.
    arrays = _core._agreed(transport, lambda: _spread(path, transport, mesh, rules, best_effort, topology, item,
                                                      subtree), f"reading {path}")
    return _pipelines.export(arrays, out, tensor_map, kind=kind, dtype=dtype, transport=transport, **options)


def convert(path: str | os.PathLike, out: str | os.PathLike, *, transport: _core.Transport | None = None,
            mesh: _core.Mesh | None = None, rules: str | Sequence[tuple[str, Any]] | None = None,
            best_effort: str | None = None, topology: _core.Topology | None = None, item: str | None = None,
            subtree: str | None = None, metadata: Mapping[str, str] | None = None,
            replace: bool = False) -> _checkpoint.SaveResult:
    """Saves the checkpoint at `path` as the reshard checkpoint `out` (``reshard.restore_checkpoint``
    then restores it onto any layout). Laid out as ``export`` lays it; collective over `transport`."""
    transport = _job_transport.for_jax(transport)
    _core._check_save_path(_paths.fspath(out, "out"), "out")  # before anything is read
    arrays = _core._agreed(transport, lambda: _spread(path, transport, mesh, rules, best_effort, topology, item,
                                                      subtree), f"reading {path}")
    return _checkpoint.save(arrays, out, metadata=metadata, replace=replace, transport=transport)


if __name__ == "__main__":
    import sys

    from ._orbax_cli import main

    sys.exit(main())
