"""reshard for JAX programs: jax.sharding.NamedSharding to and from reshard's,
jax.Array to and from ShardedArray, and device_put / to_host on pytrees.

JAX is optional: ``import reshard`` works without it; this module needs it.
Devices are matched by ``jax.Device.id``; each device's ``process_index``
gives the topology. The operations run in one process for now.
"""

from __future__ import annotations

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
from .errors import UnsupportedError

__all__ = ["device_put", "from_jax_array", "from_reshard", "to_host", "to_jax_array", "to_reshard", "topology"]


def _devices_by_id(devices: Any = None) -> dict[int, Any]:
    return {d.id: d for d in (jax.devices() if devices is None else devices)}


def topology(devices: Any = None) -> _core.Topology:
    """The Topology of `devices` (default: ``jax.devices()``, every process's):
    device ``id`` d is owned by its ``process_index``. The ids must be 0..N-1."""
    by_id = _devices_by_id(devices)
    if sorted(by_id) != list(range(len(by_id))):
        raise UnsupportedError(f"reshard needs device ids 0..{len(by_id) - 1}, JAX's are {sorted(by_id)}")
    return _core.Topology([by_id[d].process_index for d in range(len(by_id))])


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

    The shards are read through numpy (a view of CPU memory) and copied into reshard's buffers.
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
    pieces = [
        jax.device_put(s.data, _JaxSingleDeviceSharding(by_id[s.device], memory_kind=kind)) for s in array.shards
    ]
    return jax.make_array_from_single_device_arrays(array.shape, sharding, pieces)


def _is_jax_sharding(x: Any) -> bool:
    return isinstance(x, jax.sharding.Sharding)


def device_put(tree: Any, shardings: Any) -> Any:
    """`tree` (a pytree of jax.Arrays with NamedShardings, or numpy arrays) laid out by
    `shardings` (one NamedSharding for all, or a pytree prefix of `tree`), as
    jax.device_put, across any meshes and device orders; all arrays move in one operation."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    targets = jax.tree_util.tree_leaves(jax.tree_util.tree_broadcast(shardings, tree, is_leaf=_is_jax_sharding),
                                        is_leaf=_is_jax_sharding)
    topo = topology()
    ours = [to_reshard(t) for t in targets]
    sources, placed = [], {}
    for i, (leaf, target) in enumerate(zip(leaves, ours)):
        if isinstance(leaf, jax.Array):
            sources.append((i, from_jax_array(leaf, topo)))
        else:
            placed[i] = _array.from_host(np.asarray(leaf), target, topo)
    moved = _array.reshard([s for _, s in sources], [ours[i] for i, _ in sources])
    for (i, _), m in zip(sources, moved):
        placed[i] = m
    return jax.tree_util.tree_unflatten(treedef, [to_jax_array(placed[i]) for i in range(len(leaves))])


def to_host(tree: Any) -> Any:
    """Every jax.Array of `tree` whole, as numpy arrays in the same pytree, gathered in one operation."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    topo = topology()
    hosts = _array.to_host([from_jax_array(x, topo) for x in leaves])
    return jax.tree_util.tree_unflatten(treedef, hosts)
