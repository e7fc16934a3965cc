"""reshard for JAX programs: jax.sharding.NamedSharding to and from reshard's,
jax.Array to and from ShardedArray, and device_put / from_host / to_host on pytrees.

JAX is optional: ``import reshard`` works without it; this module needs it.
Devices are matched by ``jax.Device.id``; each device's ``process_index``
gives the topology. ``save`` / ``restore`` write and read reshard checkpoints
of whole pytrees (names from the tree paths), and ``check`` lists the arrays
whose sharding ``jit`` on a mesh would refuse, with the plan that fixes each.
``export`` writes a pytree as Hugging Face files through a tensor map and
``load_pretrained`` reads them back onto any shardings. ``save``, ``restore``,
``export``, ``load_pretrained``, ``device_put``, ``from_host`` and ``to_host`` are collective
over a transport (``reshard.mpi``). Across processes the JAX side must be one
multi-process JAX job (``jax.distributed``) whose process indices are the
transport's ranks: each process then moves its devices' shards. Single-process
JAX in each of several processes is refused (UnsupportedError) before anything moves.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    import jax
    from jax.sharding import Mesh as _JaxMesh
    from jax.sharding import NamedSharding as _JaxNamedSharding
    from jax.sharding import PartitionSpec as _JaxPartitionSpec
    from jax.sharding import SingleDeviceSharding as _JaxSingleDeviceSharding
except ImportError as e:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("reshard.jax needs JAX (pip install jax); the rest of reshard works without it") from e

from . import _core
from . import array as _array
from . import checkpoint as _checkpoint
from . import pipelines as _pipelines
from ._plan import plan as _plan
from .errors import InvalidArgumentError, UnsupportedError

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
    "to_host",
    "to_jax_array",
    "to_reshard",
    "topology",
]


def _devices_by_id(devices: Any = None) -> dict[int, Any]:
    return {d.id: d for d in (jax.devices() if devices is None else devices)}


def topology(devices: Any = None) -> _core.Topology:
    """The Topology of `devices` (default: ``jax.devices()``, every process's):
    device ``id`` d is owned by its ``process_index``. The ids must be 0..N-1."""
    by_id = _devices_by_id(devices)
    if sorted(by_id) != list(range(len(by_id))):
        raise UnsupportedError(f"reshard needs device ids 0..{len(by_id) - 1}, JAX's are {sorted(by_id)}")
    return _core.Topology([by_id[d].process_index for d in range(len(by_id))])


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


def _spec_entry_to_reshard(entry: Any) -> Any:
    if entry is None or isinstance(entry, str):
        return entry
    if isinstance(entry, tuple) and all(isinstance(a, str) for a in entry):
        return entry
    raise UnsupportedError(f"partition spec entry {entry!r} has no reshard form (names, tuples of names or None only)")


def to_reshard(sharding: Any) -> _core.NamedSharding:
    """reshard's NamedSharding for a ``jax.sharding.NamedSharding``: the same axis
    names and sizes, device order (by id), partition spec and memory kind. A
    ``SingleDeviceSharding`` (what ``jnp.array`` gives) is a one-device mesh, replicated."""
    if isinstance(sharding, _JaxSingleDeviceSharding):
        (device,) = sharding.device_set
        return _core.NamedSharding(_core.Mesh([device.id], ("device",)), _core.PartitionSpec(), sharding.memory_kind)
    if not isinstance(sharding, _JaxNamedSharding):
        raise UnsupportedError(f"only jax.sharding.NamedSharding converts, not {type(sharding).__name__}")
    mesh = sharding.mesh
    ids = np.vectorize(lambda d: d.id, otypes=[np.int64])(np.asarray(mesh.devices, dtype=object))
    spec = _core.PartitionSpec(*(_spec_entry_to_reshard(e) for e in sharding.spec))
    return _core.NamedSharding(_core.Mesh(ids.reshape(mesh.devices.shape), tuple(mesh.axis_names)), spec,
                               sharding.memory_kind)


def from_reshard(sharding: _core.NamedSharding, devices: Any = None) -> Any:
    """The ``jax.sharding.NamedSharding`` for reshard's `sharding`, its device ids
    looked up in `devices` (default: ``jax.devices()``)."""
    by_id = _devices_by_id(devices)
    mesh = sharding.mesh
    missing = [d for d in mesh.device_ids if d not in by_id]
    if missing:
        from .errors import UnknownDeviceError

        raise UnknownDeviceError(f"the mesh names devices {missing} that JAX does not have")
    grid = np.array([by_id[d] for d in mesh.device_ids], dtype=object).reshape(mesh.axis_sizes)
    return _JaxNamedSharding(_JaxMesh(grid, mesh.axis_names), _JaxPartitionSpec(*sharding.spec.to_tuple()),
                             memory_kind=sharding.memory_kind)


def from_jax_array(x: Any, topology_: _core.Topology | None = None) -> _array.ShardedArray:
    """This process's shards of a ``jax.Array`` with a NamedSharding, as a ShardedArray.

    The shards are read through numpy: on CPU a read-only view of JAX's own
    buffer, which the ShardedArray adopts without a copy (and keeps alive).
    """
    topology_ = topology_ or topology()
    sharding = to_reshard(x.sharding)
    shards = {s.device.id: np.asarray(s.data) for s in x.addressable_shards}
    return _array.ShardedArray.from_shards(tuple(x.shape), np.dtype(x.dtype), sharding, shards, topology_,
                                           jax.process_index())


def to_jax_array(array: _array.ShardedArray, devices: Any = None) -> Any:
    """The ``jax.Array`` of a ShardedArray (``jax.make_array_from_single_device_arrays``)."""
    sharding = from_reshard(array.sharding, devices)
    by_id = _devices_by_id(devices)
    kind = array.sharding.memory_kind
    shards = array.shards
    # One batched device_put for all shards: per-shard calls cost most of a small array's time.
    pieces = jax.device_put([s.data for s in shards],
                            [_JaxSingleDeviceSharding(by_id[s.device], memory_kind=kind) for s in shards])
    return jax.make_array_from_single_device_arrays(array.shape, sharding, pieces)


def _is_jax_sharding(x: Any) -> bool:
    return isinstance(x, jax.sharding.Sharding)


def device_put(tree: Any, shardings: Any, transport: _core.Transport | None = None) -> Any:
    """`tree` (a pytree of jax.Arrays with NamedShardings, or numpy arrays) laid out by
    `shardings` (one NamedSharding for all, or a pytree prefix of `tree`), as
    jax.device_put, across any meshes and device orders; all arrays move in one operation.
    Collective over `transport` (a multi-process JAX job, see the module's note)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    targets = jax.tree_util.tree_leaves(jax.tree_util.tree_broadcast(shardings, tree, is_leaf=_is_jax_sharding),
                                        is_leaf=_is_jax_sharding)
    topo = _job_topology(transport)
    ours = [to_reshard(t) for t in targets]
    sources, placed = [], {}
    for i, (leaf, target) in enumerate(zip(leaves, ours)):
        if isinstance(leaf, jax.Array):
            sources.append((i, from_jax_array(leaf, topo)))
        else:
            placed[i] = _array.from_host(np.asarray(leaf), target, topo, transport)
    moved = _array.reshard([s for _, s in sources], [ours[i] for i, _ in sources], transport)
    for (i, _), m in zip(sources, moved):
        placed[i] = m
    return jax.tree_util.tree_unflatten(treedef, [to_jax_array(placed[i]) for i in range(len(leaves))])


def to_host(tree: Any, transport: _core.Transport | None = None, root: int | None = None) -> Any:
    """Every jax.Array of `tree` whole, as numpy arrays in the same pytree, gathered in one
    operation. Collective over `transport`: every process gets every array whole; with
    `root`, only process `root` does (the others get None leaves, and send root just the
    elements it lacks, nothing replicated twice)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    topo = _job_topology(transport)
    hosts = _array.to_host([from_jax_array(x, topo) for x in leaves], transport, root)
    if root is not None and (0 if transport is None else transport.rank) != root:
        return jax.tree_util.tree_unflatten(treedef, [None] * len(leaves))
    return jax.tree_util.tree_unflatten(treedef, hosts)


def from_host(tree: Any, shardings: Any, transport: _core.Transport | None = None, root: int | None = None) -> Any:
    """`tree` (a pytree of numpy arrays, whole on every process) placed with `shardings`
    (one NamedSharding for all, or a pytree prefix of `tree`) as jax.Arrays: each process
    copies out its devices' slices and nothing is sent. With `root`, only process `root`'s
    values are read (the others pass leaves of the same shape and dtype, such as
    jax.ShapeDtypeStruct) and root sends each process just its shards' elements."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    targets = jax.tree_util.tree_leaves(jax.tree_util.tree_broadcast(shardings, tree, is_leaf=_is_jax_sharding),
                                        is_leaf=_is_jax_sharding)
    topo = _job_topology(transport)
    placed = [_array.from_host(leaf, to_reshard(target), topo, transport, root)
              for leaf, target in zip(leaves, targets)]
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
    """{tree path: ShardedArray} of a pytree: jax.Arrays adopted as they lie, numpy leaves whole on one device."""
    names, leaves, _ = _named_leaves(tree)
    topo = _job_topology(transport)
    arrays: dict[str, _array.ShardedArray] = {}
    for name, leaf in zip(names, leaves):
        if isinstance(leaf, jax.Array):
            arrays[name] = from_jax_array(leaf, topo)
        else:
            host = np.asarray(leaf)
            one = _core.NamedSharding(_core.Mesh([jax.devices()[0].id], ("device",)), _core.PartitionSpec())
            arrays[name] = _array.from_host(host, one, topo, transport)
    return arrays


def save(path: str | os.PathLike, tree: Any, metadata: Mapping[str, str] | None = None, replace: bool = True,
         transport: _core.Transport | None = None) -> _checkpoint.SaveStats:
    """Saves a pytree of jax.Arrays as a reshard checkpoint, each under its tree path
    (keys joined by dots: ``{"layers": [{"w": x}]}`` saves ``layers.0.w``).

    Every process writes only the chunks its devices hold, a replicated chunk
    once; numpy leaves are saved whole. Collective over `transport`.
    """
    return _checkpoint.save(path, _sharded_leaves(tree, transport), metadata, replace, transport)


def _is_target(x: Any) -> bool:
    return isinstance(x, jax.sharding.Sharding) or isinstance(getattr(x, "sharding", None), jax.sharding.Sharding)


def restore(path: str | os.PathLike, shardings: Any, verify_checksums: bool = True,
            transport: _core.Transport | None = None) -> Any:
    """The pytree of jax.Arrays saved at `path`, each laid out by its leaf of `shardings`.

    `shardings` is a pytree (any subset of the saved tree's paths) whose leaves
    are jax shardings, or anything with a ``.sharding`` (``jax.ShapeDtypeStruct``,
    a jax.Array); any mesh, device order or device count. Each process reads only
    the chunks its devices need, checksummed.
    """
    names, leaves, treedef = _named_leaves(shardings, is_leaf=_is_target)
    targets = {}
    for name, leaf in zip(names, leaves):
        sharding = leaf if isinstance(leaf, jax.sharding.Sharding) else leaf.sharding
        targets[name] = to_reshard(sharding)
    restored = _checkpoint.restore(path, targets, _job_topology(transport), verify_checksums, transport)
    return jax.tree_util.tree_unflatten(treedef, [to_jax_array(restored[n]) for n in names])


def export(tree: Any, out: str | os.PathLike, map: str, kind: str = "model", dtype: Any = None,
           transport: _core.Transport | None = None, **options: Any) -> _pipelines.ExportResult:
    """Exports a pytree of jax.Arrays (a model in a training framework's layout) to Hugging
    Face files through the tensor map `map`, as ``reshard.export``, without gathering.

    Each leaf is named by its tree path (keys joined by dots, as ``save``), so
    ``{"transformer": {"norm": {"weight": x}}}`` is ``transformer.norm.weight``
    for the map. `kind` is "model", "adapter" or "merged"; `options` are
    ``reshard.export``'s (max_shard_size, base, gather_to, replace, hf_config,
    lora_config). Every process writes what its devices hold. Collective over `transport`.
    """
    return _pipelines.export(_sharded_leaves(tree, transport), out, map, kind=kind, dtype=dtype,
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


def load_pretrained(hf_dir: str | os.PathLike, map: str, shardings: Any = None, *, mesh: Any = None,
                    rules: Any = None, best_effort: str | None = None, dtype: Any = None,
                    sizes: Mapping[str, int] | None = None, transport: _core.Transport | None = None) -> Any:
    """A Hugging Face folder (or PEFT adapter) as a pytree of jax.Arrays in the framework
    layout: `map` run backwards, as ``reshard.import_model``, each process reading only
    what its devices need.

    Either `shardings`, a pytree whose leaves are jax shardings or have a
    ``.sharding`` (``jax.ShapeDtypeStruct``, a jax.Array), named by tree path
    (keys joined by dots) and giving the result's tree, any meshes and device
    orders; or a jax `mesh` with `rules` ((glob, PartitionSpec) pairs, first
    match wins, replicated if none) or `best_effort` (shard over that axis),
    giving nested dicts by the names' dotted parts. `sizes` gives axis sizes the
    shapes do not (config.json's otherwise); `dtype` casts F32/F16/BF16.
    Collective over `transport`.
    """
    topo = _job_topology(transport)
    if shardings is not None:
        if mesh is not None or rules is not None or best_effort is not None:
            raise InvalidArgumentError("load_pretrained takes shardings, or mesh with rules/best_effort, not both")
        names, leaves, treedef = _named_leaves(shardings, is_leaf=_is_target)
        jax_targets = [leaf if isinstance(leaf, jax.sharding.Sharding) else leaf.sharding for leaf in leaves]
        targets = [to_reshard(t) for t in jax_targets]
        # Read onto the first target's mesh by exact-name rules; leaves on other meshes move after.
        first_mesh = targets[0].mesh if targets else _core.Mesh([jax.devices()[0].id], ("device",))
        name_rules = [(_glob_exact(n), t.spec) for n, t in zip(names, targets) if t.mesh == first_mesh]
        imported = _pipelines.import_model(hf_dir, map, first_mesh, topo, rules=name_rules, dtype=dtype,
                                           sizes=sizes, transport=transport)
        missing = [n for n in names if n not in imported]
        if missing:
            from .errors import MissingTensorError

            raise MissingTensorError(f"{os.fspath(hf_dir)} through the map gives no tensors {missing}")
        moving = [i for i, (n, t) in enumerate(zip(names, targets)) if imported[n].sharding != t]
        moved = _array.reshard([imported[names[i]] for i in moving], [targets[i] for i in moving],
                               transport=transport) if moving else []
        arrays = [imported[n] for n in names]
        for i, m in zip(moving, moved):
            arrays[i] = m
        return jax.tree_util.tree_unflatten(treedef, [to_jax_array(a) for a in arrays])
    if mesh is None:
        raise InvalidArgumentError("load_pretrained needs shardings, or a mesh with rules or best_effort")
    ours = None if rules is None or isinstance(rules, str) else [(p, _spec_of(s)) for p, s in rules]
    imported = _pipelines.import_model(hf_dir, map, _mesh_of(mesh), topo, rules=ours if ours is not None else rules,
                                       best_effort=best_effort, dtype=dtype, sizes=sizes, transport=transport)
    names = sorted(imported)
    return _nest(names, [to_jax_array(imported[n]) for n in names])


@dataclasses.dataclass(frozen=True)
class Incompatible:
    """An array whose sharding ``jit`` on the checked mesh refuses ("incompatible devices"),
    and the reshard that fixes it.

    `reason` is "another device order" (same mesh shape and axes, devices
    permuted), "another mesh" (the same devices in another mesh's order) or
    "another device set". `target` is the sharding to move it to (its spec on
    the mesh, replicated where the spec does not fit), and `plan` reshard's plan
    for that move; `bytes_per_process[p]` is what it copies onto process p's
    devices (pieces already on their device excluded) and `bytes_cross_process`
    what crosses between processes.
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

    def __str__(self) -> str:
        where = (f"{self.path} {list(self.shape)} {self.dtype}: {self.reason} (devices {list(self.devices)}, "
                 f"the mesh's {list(self.mesh_devices)})")
        if not any(self.bytes_per_process):
            return f"{where}; fix: relabel as {self.target.spec} on the mesh (every piece is in place, no bytes move)"
        per = ", ".join(f"process {p}: {_size(b)}" for p, b in enumerate(self.bytes_per_process))
        return (f"{where}; fix: reshard to {self.target.spec} on the mesh, moving {per} "
                f"({_size(self.bytes_cross_process)} between processes)")


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
    target = _JaxNamedSharding(mesh, spec, memory_kind=x.sharding.memory_kind)
    try:
        to_reshard(target).shard_shape(tuple(x.shape))
        return target
    except (ValueError, UnsupportedError):  # axes the mesh lacks, or indivisible
        return _JaxNamedSharding(mesh, _JaxPartitionSpec(), memory_kind=x.sharding.memory_kind)


def check(tree: Any, mesh: Any) -> list[Incompatible]:
    """The arrays of `tree` whose sharding ``jit`` on `mesh` would refuse, each with its fix.

    jit runs on the mesh's devices in the mesh's order; it refuses a committed
    array laid out on another device order, another mesh's order or another
    set of devices ("incompatible devices"), while it moves uncommitted arrays
    itself. The fix of each is the reshard to its spec on `mesh` (replicated if
    the spec does not fit there), with the bytes that would move per process
    (``reshard.jax.device_put(x, record.target)`` performs it). Empty when
    every array is compatible.
    """
    names, leaves, _ = _named_leaves(tree)
    mesh_devices = tuple(d.id for d in mesh.devices.flat)
    topo = topology()
    found = []
    for name, x in zip(names, leaves):
        if not isinstance(x, jax.Array) or not x.committed:
            continue
        devices = _device_ids(x.sharding)
        if devices == mesh_devices:
            continue
        target = _fix_target(x, mesh)
        p = _plan(tuple(x.shape), np.dtype(x.dtype), to_reshard(x.sharding), to_reshard(target), topo)
        per_process = [0] * topo.num_processes
        itemsize = np.dtype(x.dtype).itemsize
        for t in p.transfers:
            if t.src != t.dst:  # a piece already on its device does not move
                per_process[topo.process_of(t.dst)] += t.box.volume * itemsize
        found.append(Incompatible(name, tuple(x.shape), np.dtype(x.dtype), _reason(x.sharding, mesh, devices,
                                                                                    mesh_devices),
                                  devices, mesh_devices, target, p, tuple(per_process), p.stats.bytes_cross_process))
    return found
