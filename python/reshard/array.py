"""Sharded arrays whose shards are numpy arrays over reshard's own buffers.

A ``ShardedArray`` is one process's part of a global array laid out by a
``NamedSharding``: one shard per device of the mesh this process owns, each a
numpy array that shares the C++ buffer (writing to it writes the shard). The
operations are collective over a transport (``reshard.mpi.transport()``, or a
rank of an ``InProcessGroup``); without one they run in this process alone, and
the topology must have a single process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from . import _core, _tree
from ._dtypes import dtype_name, numpy_dtype

__all__ = ["Shard", "ShardedArray", "from_host", "reshard", "reshard_into", "to_host"]


class Shard(NamedTuple):
    """One device's slice: the device id, its index (slices into the global array) and its data."""

    device: int
    index: tuple[slice, ...]
    data: np.ndarray


def _default_topology(shardings: list[_core.NamedSharding], transport: _core.Transport | None = None) -> _core.Topology:
    """The one default of every call that takes an optional topology (C++'s default_topology)."""
    return _core.Topology.default_for(shardings, 1 if transport is None else transport.size)


def _mesh_topology(mesh: _core.Mesh, transport: _core.Transport | None = None) -> _core.Topology:
    """The same default for the arrays laid out on `mesh`."""
    return _default_topology([_core.NamedSharding(mesh, _core.PartitionSpec())], transport)


class ShardedArray:
    """One process's shards of a global array (see the module's docstring)."""

    __slots__ = ("_array",)

    def __init__(self, array: _core._ShardedArray) -> None:
        self._array = array

    @classmethod
    def from_shards(
        cls,
        shape: tuple[int, ...],
        dtype: Any,
        sharding: _core.NamedSharding,
        shards: Mapping[int, Any],
        topology: _core.Topology | None = None,
        process: int = 0,
    ) -> ShardedArray:
        """An array from {device id: that device's slice} for each device of `process`.

        A numpy array of the array's dtype is adopted, not copied: the shard is
        its memory (writing through either is seen through the other, and the
        numpy array lives as long as the shard). A read-only numpy array gives a
        read-only shard, which no operation writes into. Only a slice that is not
        C-contiguous is copied; one of another dtype is an InvalidArgumentError;
        anything else (a list, a scalar) is converted by ``np.asarray``.
        """
        from .errors import InvalidArgumentError

        name = dtype_name(dtype)
        topology = topology or _default_topology([sharding])
        np_dtype = numpy_dtype(name)
        devices = sharding.addressable_devices(topology, process)
        missing = [d for d in devices if d not in shards]
        if missing:
            raise InvalidArgumentError(f"no shard given for devices {missing} of process {process}")
        index = sharding.devices_indices_map(tuple(shape))
        data = []
        for d in devices:
            shard = shards[d]
            if isinstance(shard, np.ndarray):
                if shard.dtype != np_dtype:
                    raise InvalidArgumentError(f"the shard of device {d} has dtype {shard.dtype}, the array {np_dtype}")
            else:
                shard = np.asarray(shard, dtype=np_dtype)
            expected = tuple(len(range(*part.indices(n))) for part, n in zip(index[d], shape))
            if shard.shape != expected:
                raise InvalidArgumentError(f"the shard of device {d} has shape {shard.shape}, its slice needs {expected}")
            if not shard.flags.c_contiguous:
                shard = np.ascontiguousarray(shard)  # the only copy: reshard's shards are row-major
            data.append(shard.reshape(-1).view(np.uint8))
        return cls(_core._ShardedArray.from_shard_bytes(tuple(shape), name, sharding, topology, process, data))

    @classmethod
    def from_callback(
        cls,
        shape: tuple[int, ...],
        dtype: Any,
        sharding: _core.NamedSharding,
        callback: Callable[[tuple[slice, ...]], Any],
        topology: _core.Topology | None = None,
        process: int = 0,
    ) -> ShardedArray:
        """An array whose shard for each index is ``callback(index)``, as jax.make_array_from_callback."""
        name = dtype_name(dtype)
        topology = topology or _default_topology([sharding])
        array = cls(_core._ShardedArray.allocate(tuple(shape), name, sharding, topology, process))
        for shard in array.shards:
            shard.data[...] = callback(shard.index)
        return array

    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""
        return self._array.shape

    @property
    def dtype(self) -> np.dtype:
        """The element type."""
        return numpy_dtype(self._array.dtype)

    @property
    def sharding(self) -> _core.NamedSharding:
        """The layout."""
        return self._array.sharding

    @property
    def topology(self) -> _core.Topology:
        """The job's topology."""
        return self._array.topology

    @property
    def process(self) -> int:
        """The process whose shards these are."""
        return self._array.process

    @property
    def shards(self) -> list[Shard]:
        """This process's shards in mesh order; each ``data`` shares the C++ buffer.

        ``index`` is JAX's form (``slice(None)`` for a dimension the layout does not split).
        ``data`` is read-only where the shard is (adopted from a read-only array, or a map).
        """
        dtype = numpy_dtype(self._array.dtype)
        index = self._array.sharding.devices_indices_map(self._array.shape)
        return [
            Shard(s.device, index[s.device], s._bytes().view(dtype).reshape(s.box.shape)) for s in self._array.shards
        ]

    addressable_shards = shards

    @property
    def writable(self) -> bool:
        """Whether every shard may be written (an operation's destination must be)."""
        return all(s.writable for s in self._array.shards)

    def shares_memory_with(self, other: ShardedArray) -> bool:
        """Whether every shard shares its buffer with `other`'s."""
        return self._array.shares_memory_with(other._array)

    def __repr__(self) -> str:
        return f"ShardedArray(shape={self.shape}, dtype={self.dtype}, sharding={self.sharding!r})"


def _is_array(x: Any) -> bool:
    return isinstance(x, ShardedArray)


def _is_sharding(x: Any) -> bool:
    return isinstance(x, _core.NamedSharding)


def reshard(arrays: Any, shardings: Any, *, transport: _core.Transport | None = None) -> Any:
    """The array laid out by `sharding`: any mesh, device order, device set or memory kind.

    `arrays` is one ShardedArray, or a dict / list / tuple nesting of them (a
    model): then all move in one operation (their pieces travel together) and
    the result has the same nesting. `shardings` is one NamedSharding for all,
    or the same nesting (a NamedSharding in place of a subtree applies to all of
    it). An array already laid out by its target is returned sharing its buffers.
    Collective over `transport` (every process calls it with its own part);
    None runs in this process alone.
    """
    if _is_array(arrays) and _is_sharding(shardings):
        return ShardedArray(_core._reshard(arrays._array, shardings, transport))
    leaves, rebuild = _tree.flatten(arrays, _is_array, "ShardedArray")
    targets = _tree.broadcast(shardings, arrays, _is_array, _is_sharding, "sharding")
    moved = _core._reshard_arrays([a._array for a in leaves], targets, transport)
    return rebuild([ShardedArray(m) for m in moved])


def reshard_into(array: ShardedArray, out: ShardedArray, *, transport: _core.Transport | None = None) -> None:
    """Writes `array` into `out`'s existing shards, in `out`'s layout (same shape and dtype).

    `out` must be writable: a shard adopted from a read-only numpy array (or a
    map) is an InvalidArgumentError before anything moves.
    """
    _core._reshard_into(array._array, out._array, transport)


def to_host(arrays: Any, *, transport: _core.Transport | None = None, root: int | None = None) -> Any:
    """The whole array as one numpy array (it owns reshard's host buffer; no extra copy).

    A dict / list / tuple nesting of ShardedArrays gives the same nesting of
    numpy arrays, gathered in one operation. Collective over `transport`: every
    process gets the whole array; with `root`, only process `root` does (the
    others get None in each place, and send root just the elements it lacks).
    """
    if root is not None:
        return _to_root(arrays, transport, root)
    if _is_array(arrays):
        return _core._to_host(arrays._array, transport).view(arrays.dtype).reshape(arrays.shape)
    leaves, rebuild = _tree.flatten(arrays, _is_array, "ShardedArray")
    hosts = _core._to_host_arrays([a._array for a in leaves], transport)
    return rebuild([h.view(a.dtype).reshape(a.shape) for h, a in zip(hosts, leaves)])


def _to_root(arrays: Any, transport: _core.Transport | None, root: int) -> Any:
    def one(a: ShardedArray) -> np.ndarray | None:
        host = _core._to_host_root(a._array, root, transport)
        return None if host is None else host.view(a.dtype).reshape(a.shape)

    if _is_array(arrays):
        return one(arrays)
    leaves, rebuild = _tree.flatten(arrays, _is_array, "ShardedArray")
    return rebuild([one(a) for a in leaves])


def from_host(
    host: Any,
    sharding: _core.NamedSharding,
    topology: _core.Topology | None = None,
    *,
    transport: _core.Transport | None = None,
    root: int | None = None,
) -> ShardedArray:
    """A whole host array placed with `sharding`: each device of this process gets a copy of its slice.

    Collective over `transport`. Without `root` every process passes the whole
    array and nothing is sent. With `root` only that process's bytes are read:
    the others pass anything with the same `shape` and `dtype` (a
    `jax.ShapeDtypeStruct`, an empty numpy array of that shape), and root sends
    each process just its shards' elements.
    """
    topology = topology or _default_topology([sharding], transport)
    if root is not None and transport is not None and transport.rank != root:
        shape, name = tuple(host.shape), dtype_name(np.dtype(host.dtype))
        empty = np.empty(0, dtype=np.uint8)
        return ShardedArray(_core._from_host(empty, shape, name, sharding, topology, transport, root))
    host = np.asarray(host)
    name = dtype_name(host.dtype)
    flat = np.ascontiguousarray(host.reshape(-1)).view(np.uint8)
    return ShardedArray(_core._from_host(flat, host.shape, name, sharding, topology, transport, root))
