"""reshard for JAX programs: jax.sharding.NamedSharding to and from reshard's,
jax.Array to and from ShardedArray, and device_put / from_host / to_host on pytrees.

JAX is optional: ``import reshard`` works without it; this module needs it.
JAX's device ids may be any numbers (0..3, 2048..2051 in a multi-process job):
reshard numbers the job's devices densely, device d being the d-th smallest
JAX id, and converts both ways in every call, so what users pass and get back
are JAX's devices; each device's ``process_index`` gives the topology.
``save`` / ``restore`` write and read reshard checkpoints
of whole pytrees (names from the tree paths), and ``check`` lists the arrays
whose sharding ``jit`` on a mesh would refuse, with the plan that fixes each.
``export`` writes a pytree as Hugging Face files through a tensor map and
``load_pretrained`` reads them back onto any shardings. ``save``, ``restore``,
``export``, ``load_pretrained``, ``device_put``, ``from_host`` and ``to_host`` are collective
over a transport. Across processes the JAX side must be one multi-process JAX
job (``jax.distributed``) whose process indices are the transport's ranks: each
process then moves its devices' shards. ``transport=None`` means the job's own
(``reshard.transport()``, made on first use and reused): in a JAX job without
mpirun, TCP met through JAX's coordination service; under mpirun, MPI. Single-process
JAX in each of several processes is refused (UnsupportedError) before anything moves.
A collective call whose preparation fails on one process (a bad argument, an
unknown device) fails on every process before anything moves, the others
raising PeerFailedError naming that process and its error.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

try:
    import jax
    from jax.sharding import Mesh as _JaxMesh
    from jax.sharding import NamedSharding as _JaxNamedSharding
    from jax.sharding import PartitionSpec as _JaxPartitionSpec
    from jax.sharding import SingleDeviceSharding as _JaxSingleDeviceSharding
except ImportError as e:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("reshard.jax needs JAX (pip install jax); the rest of reshard works without it") from e

from . import _core, _job_transport
from . import array as _array
from . import checkpoint as _checkpoint
from . import pipelines as _pipelines
from ._device_ids import DeviceIds
from ._plan import plan as _plan
from .errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError

__all__ = [
    "Incompatible",
    "check",
    "device_put",
    "export",
    "from_host",
    "from_jax_array",
    "load_pretrained",
    "from_reshard",
    "restore",
    "save",
    "save_async",
    "to_host",
    "to_jax_array",
    "to_reshard",
    "topology",
]


_default_ids: DeviceIds | None = None


def _ids(devices: Any = None) -> DeviceIds:
    """The id mapping of `devices`, by default of ``jax.devices()`` (fixed once JAX's backend is up)."""
    global _default_ids
    if devices is not None:
        return DeviceIds(list(devices))
    if _default_ids is None:
        _default_ids = DeviceIds(jax.devices())
    return _default_ids


def topology(devices: Any = None) -> _core.Topology:
    """The Topology of `devices` (default: ``jax.devices()``, every process's): reshard
    device d is the d-th smallest JAX device id (any ids, such as 0..3, 2048..2051 in a
    multi-process job), owned by that device's ``process_index``."""
    return _core.Topology([d.process_index for d in _ids(devices).devices])


def _job_topology(transport: _core.Transport | None) -> _core.Topology:
    """The topology of JAX's devices, checked against `transport`: JAX's processes must be
    the transport's (a single-process JAX runs without one), or collectives would disagree."""
    size, rank = (1, 0) if transport is None else (transport.size, transport.rank)
    if jax.process_count() != size or jax.process_index() != rank:
        raise UnsupportedError(
            f"JAX runs {jax.process_count()} process(es) (this is process {jax.process_index()}), the transport "
            f"{size} (this is rank {rank}): reshard.jax across processes needs one multi-process JAX job "
            "(jax.distributed.initialize) whose process indices are the transport's ranks")
    return topology()


def _collective(transport: _core.Transport | None, prepare: Any) -> Any:
    """Runs a collective call's local `prepare()` and agrees on its outcome (_core._agreed,
    the pipelines' own agreement).
    A JAX job of another size than the transport is refused at once, without agreeing:
    every process sees it (single-process JAX in each of several processes, say), and
    the processes of such a job need not all reach the call."""
    size = 1 if transport is None else transport.size
    if jax.process_count() != size:
        _job_topology(transport)  # raises, naming both
    return _core._agreed(transport, prepare, "preparing the call, before anything moved")


def _spec_entry_to_reshard(entry: Any) -> Any:
    if entry is None or isinstance(entry, str):
        return entry
    if isinstance(entry, tuple) and all(isinstance(a, str) for a in entry):
        return entry
    raise UnsupportedError(f"partition spec entry {entry!r} has no reshard form (names, tuples of names or None only)")


def to_reshard(sharding: Any, devices: Any = None) -> _core.NamedSharding:
    """reshard's NamedSharding for a ``jax.sharding.NamedSharding``: the same axis
    names and sizes, device order, partition spec and memory kind, its devices
    numbered as ``topology(devices)`` numbers them. A ``SingleDeviceSharding``
    (what ``jnp.array`` gives) is a one-device mesh, replicated."""
    ids = _ids(devices)
    if isinstance(sharding, _JaxSingleDeviceSharding):
        (device,) = sharding.device_set
        return _core.NamedSharding(_core.Mesh([ids.dense_one(device.id)], ("device",)), _core.PartitionSpec(),
                                   sharding.memory_kind)
    if not isinstance(sharding, _JaxNamedSharding):
        raise UnsupportedError(f"only jax.sharding.NamedSharding converts, not {type(sharding).__name__}")
    mesh = sharding.mesh
    jax_ids = np.vectorize(lambda d: d.id, otypes=[np.int64])(np.asarray(mesh.devices, dtype=object))
    spec = _core.PartitionSpec(*(_spec_entry_to_reshard(e) for e in sharding.spec))
    return _core.NamedSharding(_core.Mesh(ids.dense(jax_ids).reshape(mesh.devices.shape), tuple(mesh.axis_names)),
                               spec, sharding.memory_kind)


def from_reshard(sharding: _core.NamedSharding, devices: Any = None) -> Any:
    """The ``jax.sharding.NamedSharding`` for reshard's `sharding`, its devices
    numbered as ``topology(devices)`` numbers them (default: ``jax.devices()``)."""
    ids = _ids(devices)
    mesh = sharding.mesh
    grid = np.array([ids.device(d) for d in mesh.device_ids], dtype=object).reshape(mesh.axis_sizes)
    return _JaxNamedSharding(_JaxMesh(grid, mesh.axis_names), _JaxPartitionSpec(*sharding.spec.to_tuple()),
                             memory_kind=sharding.memory_kind)


def from_jax_array(x: Any, topology_: _core.Topology | None = None) -> _array.ShardedArray:
    """This process's shards of a ``jax.Array`` with a NamedSharding, as a ShardedArray.

    The shards are read through numpy: on CPU a read-only view of JAX's own
    buffer, which the ShardedArray adopts without a copy (and keeps alive).
    """
    topology_ = topology_ or topology()
    ids = _ids()
    sharding = to_reshard(x.sharding)
    shards = {ids.dense_one(s.device.id): np.asarray(s.data) for s in x.addressable_shards}
    return _array.ShardedArray.from_shards(tuple(x.shape), np.dtype(x.dtype), sharding, shards, topology_,
                                           jax.process_index())


def to_jax_array(array: _array.ShardedArray, devices: Any = None, sharding: Any = None) -> Any:
    """The ``jax.Array`` of a ShardedArray (``jax.make_array_from_single_device_arrays``), with
    `sharding` (a jax Sharding of the same layout, a SingleDeviceSharding say) or by default
    the NamedSharding ``from_reshard`` gives."""
    sharding = from_reshard(array.sharding, devices) if sharding is None else sharding
    return _assembled(array, sharding, [s.data for s in array.shards], _ids(devices))


def _assembled(array: _array.ShardedArray, sharding: Any, data: list[np.ndarray], ids: DeviceIds) -> Any:
    """The jax.Array of `array`'s layout whose shards hold `data` (one per shard of `array`)."""
    kind = array.sharding.memory_kind
    # One batched device_put for all shards: per-shard calls cost most of a small array's time.
    pieces = jax.device_put(data, [_JaxSingleDeviceSharding(ids.device(s.device), memory_kind=kind)
                                   for s in array.shards])
    # dtype: a process may hold no shard of an array on a subset of the job's devices.
    return jax.make_array_from_single_device_arrays(array.shape, sharding, pieces, dtype=array.dtype)


def _is_jax_sharding(x: Any) -> bool:
    return isinstance(x, (jax.sharding.Sharding, jax.Device, _core.NamedSharding))


def _as_jax_sharding(target: Any) -> Any:
    """A target as jax.device_put takes it (a jax Sharding or a jax.Device), or reshard's own
    NamedSharding (devices numbered as ``topology()`` numbers them), as a jax Sharding."""
    if isinstance(target, jax.Device):
        return _JaxSingleDeviceSharding(target)
    if isinstance(target, _core.NamedSharding):
        return from_reshard(target)
    if isinstance(target, jax.sharding.Sharding):
        return target
    raise InvalidArgumentError(f"a target must be a jax Sharding, a jax.Device or a reshard NamedSharding, "
                               f"not {type(target).__name__}")


def _targets(shardings: Any, tree: Any) -> list[Any]:
    """The jax sharding of each leaf of `tree`: `shardings` is one target for all or a pytree
    prefix of `tree` (jax shardings, jax.Devices or reshard NamedShardings)."""
    broadcast = jax.tree_util.tree_broadcast(shardings, tree, is_leaf=_is_jax_sharding)
    return [_as_jax_sharding(t) for t in jax.tree_util.tree_leaves(broadcast, is_leaf=_is_jax_sharding)]


def device_put(tree: Any, shardings: Any, *, transport: _core.Transport | None = None,
               donate: bool | Any = False) -> Any:
    """`tree` (a pytree of jax.Arrays, or numpy arrays) laid out by `shardings` (one target
    for all or a pytree prefix of `tree`: jax shardings, jax.Devices, or reshard's own
    NamedShardings), as jax.device_put, across any meshes, device orders, device sets and
    processes; all arrays move in one operation, and each result has its target's
    sharding. `donate` (a bool, or a pytree prefix of bools) deletes the donated source
    arrays once the results exist, as jax.device_put's. Collective over `transport` (a
    multi-process JAX job, see the module's note)."""
    transport = _job_transport.for_jax(transport)

    def prepare() -> tuple[Any, list[Any], list[_array.ShardedArray], list[int], list[Any],
                           list[_core.NamedSharding], list[bool]]:
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        targets = _targets(shardings, tree)
        donated = _donated(donate, tree)
        ours = [to_reshard(t) for t in targets]
        topo = _job_topology(transport)
        arrays, moving = [], []
        for i, (leaf, target) in enumerate(zip(leaves, ours)):
            if isinstance(leaf, jax.Array):
                arrays.append(from_jax_array(leaf, topo))
                moving.append(i)
            else:  # whole on every process: each copies out its shards, nothing moves
                arrays.append(_array.from_host(np.asarray(leaf), target, topo, transport=transport))
        return treedef, leaves, arrays, moving, targets, ours, donated

    treedef, leaves, arrays, moving, targets, ours, donated = _collective(transport, prepare)
    moved = _array.reshard([arrays[i] for i in moving], [ours[i] for i in moving], transport=transport)
    for i, m in zip(moving, moved):
        arrays[i] = m
    results = [_fresh_jax_array(a, t) if d else to_jax_array(a, sharding=t)
               for a, t, d in zip(arrays, targets, donated)]
    for leaf, d in zip(leaves, donated):
        if d and isinstance(leaf, jax.Array):
            leaf.delete()
    return jax.tree_util.tree_unflatten(treedef, results)


def _donated(donate: Any, tree: Any) -> list[bool]:
    """Whether each leaf of `tree` is donated: `donate` is a bool or a pytree prefix of bools."""
    if isinstance(donate, bool):
        return [donate] * len(jax.tree_util.tree_leaves(tree))
    flags = jax.tree_util.tree_leaves(jax.tree_util.tree_broadcast(donate, tree))
    if not all(isinstance(f, bool) for f in flags):
        raise InvalidArgumentError(f"donate must be a bool or a pytree prefix of bools, not {donate!r}")
    return flags


def _fresh_jax_array(array: _array.ShardedArray, sharding: Any) -> Any:
    """to_jax_array over copies of the shards: a donated source is deleted afterwards, and a
    result must not share its memory (a move that changes nothing returns its source)."""
    return _assembled(array, sharding, [np.array(s.data) for s in array.shards], _ids())


def to_host(tree: Any, *, transport: _core.Transport | None = None, root: int | None = None) -> Any:
    """Every jax.Array of `tree` whole, as numpy arrays in the same pytree, gathered in one
    operation. Collective over `transport`: every process gets every array whole; with
    `root`, only process `root` does (the others get None leaves, and send root just the
    elements it lacks, nothing replicated twice)."""
    transport = _job_transport.for_jax(transport)

    def prepare() -> tuple[Any, list[_array.ShardedArray]]:
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        topo = _job_topology(transport)
        if root is not None and not 0 <= root < topo.num_processes:
            raise InvalidArgumentError(f"root={root} is not a process of the job (0..{topo.num_processes - 1})")
        return treedef, [from_jax_array(x, topo) for x in leaves]

    treedef, arrays = _collective(transport, prepare)
    hosts = _array.to_host(arrays, transport=transport, root=root)
    if root is not None and (0 if transport is None else transport.rank) != root:
        return jax.tree_util.tree_unflatten(treedef, [None] * len(arrays))
    return jax.tree_util.tree_unflatten(treedef, hosts)


def from_host(tree: Any, shardings: Any, *, transport: _core.Transport | None = None, root: int | None = None) -> Any:
    """`tree` (a pytree of numpy arrays, whole on every process) placed with `shardings`
    (one NamedSharding for all, or a pytree prefix of `tree`) as jax.Arrays: each process
    copies out its devices' slices and nothing is sent. With `root`, only process `root`'s
    values are read (the others pass leaves of the same shape and dtype, such as
    jax.ShapeDtypeStruct) and root sends each process just its shards' elements."""
    transport = _job_transport.for_jax(transport)

    def prepare() -> tuple[Any, list[Any], list[_core.NamedSharding], _core.Topology]:
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        ours = [to_reshard(t) for t in _targets(shardings, tree)]
        topo = _job_topology(transport)
        if root is not None and not 0 <= root < topo.num_processes:
            raise InvalidArgumentError(f"root={root} is not a process of the job (0..{topo.num_processes - 1})")
        return treedef, leaves, ours, topo

    treedef, leaves, ours, topo = _collective(transport, prepare)
    placed = [_array.from_host(leaf, target, topo, transport=transport, root=root) for leaf, target in zip(leaves, ours)]
    return jax.tree_util.tree_unflatten(treedef, [to_jax_array(p) for p in placed])


def _key_name(key: Any) -> str:
    for attr in ("key", "idx", "name"):  # DictKey, SequenceKey, GetAttrKey; FlattenedIndexKey has key
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _path_name(path: Any) -> str:
    """A tree path as a checkpoint name: its keys joined by dots (``params.layers.0.w``)."""
    return ".".join(_key_name(k) for k in path) or "_"


def _named_leaves(tree: Any, is_leaf: Any = None) -> tuple[list[str], list[Any], Any]:
    pairs, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)
    names = [_path_name(path) for path, _ in pairs]
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    clashes = sorted(n for n, c in seen.items() if c > 1)
    if clashes:
        raise InvalidArgumentError(f"tree paths {clashes} name several leaves once their keys are joined by dots")
    return names, [leaf for _, leaf in pairs], treedef


def _sharded_leaves(tree: Any, transport: _core.Transport | None) -> dict[str, _array.ShardedArray]:
    """{tree path: ShardedArray} of a pytree: jax.Arrays adopted as they lie, numpy leaves
    whole on the job's first device. Local to each process (no communication), agreed on
    by every process before the collective that uses it."""
    if isinstance(tree, (str, os.PathLike)):  # the old order, save(path, tree): say so rather than save a string
        raise ArgumentTypeError(f"tree: a pytree of arrays, not a {type(tree).__name__}: the tree comes first, "
                                "then the path")

    def prepare() -> dict[str, _array.ShardedArray]:
        names, leaves, _ = _named_leaves(tree)
        topo = _job_topology(transport)
        first = _core.NamedSharding(_core.Mesh([0], ("device",)), _core.PartitionSpec())
        return {name: from_jax_array(leaf, topo) if isinstance(leaf, jax.Array)
                else _array.from_host(np.asarray(leaf), first, topo, transport=transport)
                for name, leaf in zip(names, leaves)}

    return _collective(transport, prepare)


def save(tree: Any, path: str | os.PathLike, *, metadata: Mapping[str, str] | None = None, replace: bool = False,
         transport: _core.Transport | None = None) -> _checkpoint.SaveResult:
    """Saves a pytree of jax.Arrays as a reshard checkpoint, each under its tree path
    (keys joined by dots: ``{"layers": [{"w": x}]}`` saves ``layers.0.w``).

    Every process writes only the chunks its devices hold, a replicated chunk
    once; numpy leaves are saved whole. Collective over `transport`.
    """
    transport = _job_transport.for_jax(transport)
    return _checkpoint.save(_sharded_leaves(tree, transport), path, metadata=metadata, replace=replace,
                            transport=transport)


def save_async(tree: Any, path: str | os.PathLike, *, metadata: Mapping[str, str] | None = None,
               replace: bool = False, staging_bytes: int = _core.DEFAULT_STAGING_BYTES,
               transport: _core.Transport | None = None) -> _checkpoint.SaveHandle:
    """Like ``save``, returning once this process's chunks are copied to host memory (the
    arrays may then be donated or freed); the writing and the commit go on in the
    background. ``handle.wait()`` returns the SaveResult or raises the save's error, on
    every process. `transport` must not be used by anything else until wait() returns.
    """
    transport = _job_transport.for_jax(transport)
    return _checkpoint.save_async(_sharded_leaves(tree, transport), path, metadata=metadata, replace=replace,
                                  staging_bytes=staging_bytes, transport=transport)


def _is_target(x: Any) -> bool:
    return isinstance(x, jax.sharding.Sharding) or isinstance(getattr(x, "sharding", None), jax.sharding.Sharding)


def _sharding_of(target: Any) -> Any:
    """A target leaf's sharding: the leaf itself, or its ``.sharding`` (ShapeDtypeStruct, jax.Array)."""
    return target if isinstance(target, jax.sharding.Sharding) else target.sharding


_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def restore(path: str | os.PathLike, shardings: Any, *, verify_checksums: bool = True,
            transport: _core.Transport | None = None, mesh: Any = None, casting: str = "safe") -> Any:
    """The pytree of jax.Arrays saved at `path`, each laid out by its leaf of `shardings`.

    `shardings` is a pytree (any subset of the saved tree's paths) whose leaves
    are jax shardings, anything with a ``.sharding`` (``jax.ShapeDtypeStruct``, a
    jax.Array), or PartitionSpecs laid on `mesh`; any mesh, device order or device
    count. A leaf with a shape must have the saved shape (InvalidArgumentError
    naming the tensor otherwise); one with a dtype gets that dtype, cast as numpy's
    ``astype`` under `casting` ("safe" by default: bf16 to f32 is cast, f32 to bf16
    is refused unless ``casting="same_kind"``). Each process reads only the chunks
    its devices need, checksummed.
    """
    transport = _job_transport.for_jax(transport)
    if casting not in _CASTINGS:
        raise InvalidArgumentError(f"casting={casting!r}: one of {', '.join(map(repr, _CASTINGS))}, as numpy's")

    def prepare() -> tuple[list[str], Any, dict[str, _core.NamedSharding], dict[str, Any], _core.Topology]:
        names, leaves, treedef = _named_leaves(shardings, is_leaf=_is_restore_target)
        targets = {name: to_reshard(_restore_sharding(name, leaf, mesh)) for name, leaf in zip(names, leaves)}
        wanted = {name: leaf for name, leaf in zip(names, leaves) if hasattr(leaf, "shape") and hasattr(leaf, "dtype")}
        return names, treedef, targets, wanted, _job_topology(transport)

    names, treedef, targets, wanted, topo = _collective(transport, prepare)
    restored = _checkpoint.restore(path, targets, topology=topo, verify_checksums=verify_checksums, transport=transport)
    for name, leaf in wanted.items():  # the same on every process: the checkpoint and the tree are
        restored[name] = _as_requested(name, restored[name], tuple(leaf.shape), np.dtype(leaf.dtype), casting)
    return jax.tree_util.tree_unflatten(treedef, [to_jax_array(restored[n]) for n in names])


def _is_restore_target(x: Any) -> bool:
    return _is_target(x) or isinstance(x, (_JaxPartitionSpec, jax.ShapeDtypeStruct))


def _restore_sharding(name: str, leaf: Any, mesh: Any) -> Any:
    """The jax sharding a restore target leaf asks for."""
    if isinstance(leaf, _JaxPartitionSpec):
        if mesh is None:
            raise InvalidArgumentError(f"shardings[{name!r}] is a PartitionSpec, which names no devices: "
                                       "pass mesh= to lay it on, or a NamedSharding")
        return _JaxNamedSharding(mesh, leaf)
    sharding = leaf if isinstance(leaf, jax.sharding.Sharding) else getattr(leaf, "sharding", None)
    if not isinstance(sharding, jax.sharding.Sharding):
        raise InvalidArgumentError(f"shardings[{name!r}] is a {type(leaf).__name__} without a sharding: give a jax "
                                   "sharding, a ShapeDtypeStruct(shape, dtype, sharding=...) or a PartitionSpec "
                                   "with mesh=")
    return sharding


def _as_requested(name: str, array: _array.ShardedArray, shape: tuple[int, ...], dtype: np.dtype,
                  casting: str) -> _array.ShardedArray:
    """`array` (as saved) checked against the shape its target asks for and cast to its dtype."""
    if array.shape != shape:
        raise InvalidArgumentError(f"shardings[{name!r}] asks for shape {shape}, the checkpoint holds {name!r} "
                                   f"with shape {array.shape}")
    if array.dtype == dtype:
        return array
    if not np.can_cast(array.dtype, dtype, casting):
        allowing = next(c for c in _CASTINGS if np.can_cast(array.dtype, dtype, c))
        raise InvalidArgumentError(f"shardings[{name!r}] asks for {dtype}, the checkpoint holds {name!r} as "
                                   f"{array.dtype}: not a {casting!r} cast (casting={allowing!r} casts it)")
    shards = {s.device: s.data.astype(dtype) for s in array.shards}
    return _array.ShardedArray.from_shards(shape, dtype, array.sharding, shards, array.topology, array.process)


def export(tree: Any, out: str | os.PathLike, tensor_map: str, *, kind: Literal["model", "adapter", "merged"] = "model",
           dtype: Any = None, transport: _core.Transport | None = None, **options: Any) -> _pipelines.ExportResult:
    """Exports a pytree of jax.Arrays (a model in a training framework's layout) to Hugging
    Face files through the tensor map `tensor_map`, as ``reshard.export``, without gathering.

    Each leaf is named by its tree path (keys joined by dots, as ``save``), so
    ``{"transformer": {"norm": {"weight": x}}}`` is ``transformer.norm.weight``
    for the map. `kind` is "model", "adapter" or "merged"; `options` are
    ``reshard.export``'s (max_shard_size, base, gather_to, replace, hf_config,
    lora_config, part_size, parts_in_flight). Every process writes what its devices hold,
    to a local folder or to ``s3://`` / ``gs://`` (each process uploading the parts it
    holds). Collective over `transport`.
    """
    transport = _job_transport.for_jax(transport)
    return _pipelines.export(_sharded_leaves(tree, transport), out, tensor_map, kind=kind, dtype=dtype,
                             transport=transport, **options)


def _glob_exact(name: str) -> str:
    """An fnmatch pattern matching exactly `name`."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in name)


def _spec_of(spec: Any) -> _core.PartitionSpec:
    if isinstance(spec, _core.PartitionSpec):
        return spec
    return _core.PartitionSpec(*(_spec_entry_to_reshard(e) for e in spec))


def _mesh_of(mesh: Any) -> _core.Mesh:
    if isinstance(mesh, _core.Mesh):
        return mesh
    return to_reshard(_JaxNamedSharding(mesh, _JaxPartitionSpec())).mesh


def _nest(names: list[str], values: list[Any]) -> dict[str, Any]:
    """Nested dicts from dotted names (``a.b.c`` is ``tree["a"]["b"]["c"]``)."""
    root: dict[str, Any] = {}
    for name, value in zip(names, values):
        *parents, last = name.split(".")
        node = root
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InvalidArgumentError(f"{name!r}: {part!r} is both a tensor and a prefix of another")
        if last in node:
            raise InvalidArgumentError(f"{name!r}: {last!r} is both a tensor and a prefix of another")
        node[last] = value
    return root


def load_pretrained(hf_dir: str | os.PathLike, tensor_map: str, shardings: Any = None, *, mesh: Any = None,
                    rules: Any = None, best_effort: str | None = None, dtype: Any = None,
                    sizes: Mapping[str, int] | None = None, transport: _core.Transport | None = None) -> Any:
    """A Hugging Face folder (or PEFT adapter) as a pytree of jax.Arrays in the framework
    layout: `tensor_map` run backwards, as ``reshard.import_model``, each process reading only
    what its devices need.

    Either `shardings`, a pytree whose leaves are jax shardings or have a
    ``.sharding`` (``jax.ShapeDtypeStruct``, a jax.Array), named by tree path
    (keys joined by dots) and giving the result's tree, any meshes and device
    orders; or a jax `mesh` with `rules` ((glob, PartitionSpec) pairs, first
    match wins) and `best_effort` (shard over that axis what no rule lays
    out; replicated otherwise), as ``reshard.import_model``,
    giving nested dicts by the names' dotted parts. `sizes` gives axis sizes the
    shapes do not (config.json's otherwise); `dtype` casts F32/F16/BF16.
    Collective over `transport`.
    """
    transport = _job_transport.for_jax(transport)
    if shardings is not None:
        return _load_onto_shardings(hf_dir, tensor_map, shardings, mesh is not None or rules is not None
                                    or best_effort is not None, dtype, sizes, transport)

    def prepare() -> tuple[_core.Mesh, Any, _core.Topology]:
        if mesh is None:
            raise InvalidArgumentError("load_pretrained needs shardings, or a mesh with rules or best_effort")
        ours = rules if rules is None or isinstance(rules, str) else [(p, _spec_of(s)) for p, s in rules]
        return _mesh_of(mesh), ours, _job_topology(transport)

    our_mesh, our_rules, topo = _collective(transport, prepare)
    imported = _pipelines.import_model(hf_dir, tensor_map, our_mesh, topo, rules=our_rules, best_effort=best_effort,
                                       dtype=dtype, sizes=sizes, transport=transport)
    names = sorted(imported)
    return _nest(names, [to_jax_array(imported[n]) for n in names])


def _load_onto_shardings(hf_dir: str | os.PathLike, tensor_map: str, shardings: Any, also_mesh: bool, dtype: Any,
                         sizes: Mapping[str, int] | None, transport: _core.Transport | None) -> Any:
    """load_pretrained onto a pytree of target shardings: read onto the first target's mesh
    by exact-name rules, then move the leaves whose targets lie on other meshes."""

    def prepare() -> tuple[list[str], Any, list[_core.NamedSharding], _core.Topology]:
        if also_mesh:
            raise InvalidArgumentError("load_pretrained takes shardings, or mesh with rules/best_effort, not both")
        names, leaves, treedef = _named_leaves(shardings, is_leaf=_is_target)
        return names, treedef, [to_reshard(_sharding_of(leaf)) for leaf in leaves], _job_topology(transport)

    names, treedef, targets, topo = _collective(transport, prepare)
    first_mesh = targets[0].mesh if targets else _core.Mesh([0], ("device",))
    name_rules = [(_glob_exact(n), t.spec) for n, t in zip(names, targets) if t.mesh == first_mesh]
    # strict: a target's spec is for exactly its tensor, so one that does not fit its rank is
    # the caller's mistake, not a rule to fall through to replication.
    imported = _pipelines.import_model(hf_dir, tensor_map, first_mesh, topo, rules=name_rules, dtype=dtype, sizes=sizes,
                                       transport=transport, strict=True)
    missing = [n for n in names if n not in imported]
    if missing:  # the same on every process: the folder and the map are
        from .errors import MissingTensorError

        raise MissingTensorError(f"{os.fspath(hf_dir)} through the map gives no tensors {missing}")
    moving = [i for i, (n, t) in enumerate(zip(names, targets)) if imported[n].sharding != t]
    moved = _array.reshard([imported[names[i]] for i in moving], [targets[i] for i in moving],
                           transport=transport) if moving else []
    arrays = [imported[n] for n in names]
    for i, m in zip(moving, moved):
        arrays[i] = m
    return jax.tree_util.tree_unflatten(treedef, [to_jax_array(a) for a in arrays])


@dataclasses.dataclass(frozen=True)
class Incompatible:
    """An array whose sharding ``jit`` on the checked mesh refuses ("incompatible devices"),
    and the reshard that fixes it.

    `use` is the kind of use checked (see ``check``). `reason` is "another device
    order" (same mesh shape and axes, devices permuted), "another mesh" (the same
    devices in another mesh's order) or "another device set"; for in_shardings,
    "another tiling" or "another memory kind". `target` is the sharding to move it
    to (its spec on the mesh, replicated where the spec does not fit; for
    in_shardings the in_sharding), and `plan` reshard's plan
    for that move; `bytes_per_process[p]` is what it copies onto process p's
    devices (pieces already on their device excluded) and `bytes_cross_process`
    what crosses between processes. Devices are JAX's ids; ``report()`` adds
    pictures of the layouts before and after the fix.
    """

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    reason: str
    devices: tuple[int, ...]
    mesh_devices: tuple[int, ...]
    target: Any
    plan: _core.Plan
    bytes_per_process: tuple[int, ...]
    bytes_cross_process: int
    use: str = "out_shardings"

    def __str__(self) -> str:
        theirs = "the in_sharding's" if self.use == "in_shardings" else "the mesh's"
        where = (f"{self.path} {list(self.shape)} {self.dtype}: jit ({self.use}) refuses {self.reason} "
                 f"(devices {list(self.devices)}, {theirs} {list(self.mesh_devices)})")
        onto = "as the in_sharding" if self.use == "in_shardings" else f"to {self.target.spec} on the mesh"
        if not any(self.bytes_per_process):
            return f"{where}; fix: relabel {onto} (every piece is in place, no bytes move)"
        per = ", ".join(f"process {p}: {_size(b)}" for p, b in enumerate(self.bytes_per_process))
        return f"{where}; fix: reshard {onto}, moving {per} ({_size(self.bytes_cross_process)} between processes)"

    def report(self, color: bool = False, width: int = 80) -> str:
        """The one-line finding (``str``), then pictures of the array as it lies and as the
        fix lays it out, blocks labelled with JAX's device ids (any rank: the split
        dimensions drawn, the others named in a caption)."""
        ids = _ids()
        labels = [int(i) for i in ids.jax_ids]
        platform = ids.devices[0].platform.upper()
        lines = [str(self)]
        for title, sharding in (("as it lies", self.plan.src), ("after the fix", self.plan.dst)):
            picture = sharding.picture(self.shape, labels, dtype=str(self.dtype), platform=platform, color=color,
                                       width=width)
            lines.append(f"{title}:")
            lines.append(picture.rstrip("\n") if picture is not None else "  (too many blocks to draw)")
        return "\n".join(lines)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


def _device_ids(sharding: Any) -> tuple[int, ...]:
    """The devices a computation on `sharding` runs on, in jit's order (the mesh's, flattened)."""
    if isinstance(sharding, _JaxNamedSharding):
        return tuple(d.id for d in sharding.mesh.devices.flat)
    if isinstance(sharding, _JaxSingleDeviceSharding):
        return tuple(d.id for d in sharding.device_set)
    return tuple(d.id for d in sharding._device_assignment)  # other Sharding kinds keep it here


def _reason(sharding: Any, mesh: Any, devices: tuple[int, ...], mesh_devices: tuple[int, ...]) -> str:
    if set(devices) != set(mesh_devices):
        return "another device set"
    if isinstance(sharding, _JaxNamedSharding) and sharding.mesh.shape == mesh.shape:
        return "another device order"
    return "another mesh"


def _fix_target(x: Any, mesh: Any) -> Any:
    spec = x.sharding.spec if isinstance(x.sharding, _JaxNamedSharding) else _JaxPartitionSpec()
    try:
        target = _JaxNamedSharding(mesh, spec, memory_kind=x.sharding.memory_kind)
        to_reshard(target).shard_shape(tuple(x.shape))
        return target
    except (ValueError, UnsupportedError):  # axes the mesh lacks, or indivisible
        return _JaxNamedSharding(mesh, _JaxPartitionSpec(), memory_kind=x.sharding.memory_kind)


def _position_index_map(sharding: Any, shape: tuple[int, ...]) -> list[tuple] | str:
    """What XLA's HLO sharding compares: each device's slice, listed by the device's position
    in the sharding's device order (whichever devices they are), or "replicated" when every
    device holds the whole array (on any number of devices: HLO keeps no tiles then)."""
    indices = sharding.devices_indices_map(shape)
    order = sharding.mesh.devices.flat if isinstance(sharding, _JaxNamedSharding) else sharding._device_assignment
    slices = [tuple(s.indices(n) for s, n in zip(indices[d], shape)) for d in order]
    whole = tuple((0, n, 1) for n in shape)
    return "replicated" if all(s == whole for s in slices) else slices


def _in_sharding_refusal(x: Any, target: Any) -> str | None:
    """Why ``jit(f, in_shardings=target)(x)`` refuses `x` (JAX 0.10.2's rule: another memory
    kind, for any jax.Array; another tiling for a committed one), or None: it reshards
    a committed array on other devices or in another order itself when the tiles match."""
    if not isinstance(x, jax.Array):
        return None
    if x.sharding.memory_kind != target.memory_kind:
        return "another memory kind"
    if x.committed and _position_index_map(x.sharding, tuple(x.shape)) != _position_index_map(target, tuple(x.shape)):
        return "another tiling"
    return None


def _incompatible(name: str, x: Any, use: str, reason: str, target: Any, mesh_devices: tuple[int, ...],
                  topo: _core.Topology) -> Incompatible:
    p = _plan(tuple(x.shape), np.dtype(x.dtype), to_reshard(x.sharding), to_reshard(target), topo)
    per_process = [0] * topo.num_processes
    itemsize = np.dtype(x.dtype).itemsize
    for t in p.transfers:
        if t.src != t.dst:  # a piece already on its device does not move
            per_process[topo.process_of(t.dst)] += t.box.volume * itemsize
    return Incompatible(name, tuple(x.shape), np.dtype(x.dtype), reason, _device_ids(x.sharding), mesh_devices,
                        target, p, tuple(per_process), p.stats.bytes_cross_process, use)


USES = ("out_shardings", "arguments", "in_shardings")


def check(tree: Any, mesh: Any = None, *, use: str = "out_shardings", in_shardings: Any = None) -> list[Incompatible]:
    """The arrays of `tree` that ``jit`` would refuse when used as `use` says, each with its fix.

    JAX 0.10.2's rules, per kind of use:

    - ``use="out_shardings"`` (the default): a computation on `mesh`, as
      ``jit(f, out_shardings=NamedSharding(mesh, ...))(*tree)`` or plain ``jit`` under
      ``jax.set_mesh(mesh)``. It runs on the mesh's devices in the mesh's order and
      refuses a committed argument on another device order, another mesh's order or
      another set of devices ("Received incompatible devices for jitted computation");
      uncommitted arrays it moves itself. Fix: the array's spec on `mesh` (replicated
      where the spec does not fit there).
    - ``use="arguments"``: plain ``jit(f)(*tree)``, no shardings: the committed arguments
      must all share one device order, `mesh`'s if given, else the first committed
      array's. Fix: as above, on that mesh.
    - ``use="in_shardings"``: ``jit(f, in_shardings=in_shardings)(*tree)``, with
      `in_shardings` one sharding or a pytree prefix of `tree`: jit reshards a committed
      argument in another device order or on other devices when its tiles match, and
      refuses another tiling ("Sharding passed to jit does not match") or, for any
      array, another memory kind. Fix: the in_sharding itself.

    Each finding has the bytes that would move per process
    (``reshard.jax.device_put(x, finding.target)`` performs it). Empty when jit accepts
    every array. Device ids are JAX's.
    """
    if use not in USES:
        raise InvalidArgumentError(f"use={use!r}: check models {', '.join(map(repr, USES))}")
    names, leaves, _ = _named_leaves(tree)
    topo = topology()
    if use == "in_shardings":
        if in_shardings is None:
            raise InvalidArgumentError('use="in_shardings" needs in_shardings= (what jit will be given)')
        found = []
        for name, x, target in zip(names, leaves, _targets(in_shardings, tree)):
            reason = _in_sharding_refusal(x, target)
            if reason is not None:
                found.append(_incompatible(name, x, use, reason, target, _device_ids(target), topo))
        return found
    if in_shardings is not None:
        raise InvalidArgumentError(f'in_shardings= is for use="in_shardings", not use={use!r}')
    committed = [(n, x) for n, x in zip(names, leaves) if isinstance(x, jax.Array) and x.committed]
    if mesh is None:
        if use == "out_shardings":
            raise InvalidArgumentError('use="out_shardings" needs mesh= (the mesh of the out_shardings)')
        if not committed:
            return []
        mesh = _mesh_of_array(committed[0][1])
    mesh_devices = tuple(d.id for d in mesh.devices.flat)
    return [_incompatible(n, x, use, _reason(x.sharding, mesh, _device_ids(x.sharding), mesh_devices),
                          _fix_target(x, mesh), mesh_devices, topo)
            for n, x in committed if _device_ids(x.sharding) != mesh_devices]


def _mesh_of_array(x: Any) -> Any:
    """The mesh a committed array lies on (a one-device mesh for a single-device array)."""
    if isinstance(x.sharding, _JaxNamedSharding):
        return x.sharding.mesh
    devices = np.array(list(x.sharding._device_assignment), dtype=object)
    return _JaxMesh(devices, ("devices",))
