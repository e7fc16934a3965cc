"""Sharded arrays whose shards are numpy arrays over reshard's own buffers.

A ``ShardedArray`` is one process's part of a global array laid out by a
``NamedSharding``: one shard per device of the mesh this process owns, each a
numpy array that shares the C++ buffer (writing to it writes the shard). The
operations here run in one process; the topology must have a single process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from . import _core
from ._dtypes import dtype_name, numpy_dtype

__all__ = ["Shard", "ShardedArray", "from_host", "reshard", "to_host"]


class Shard(NamedTuple):
    """One device's slice: the device id, its index (slices into the global array) and its data."""

    device: int
    index: tuple[slice, ...]
    data: np.ndarray


def _default_topology(sharding: _core.NamedSharding) -> _core.Topology:
    return _core.Topology.uniform(max(sharding.mesh.device_ids) + 1, 1)


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
        shards: Mapping[int, np.ndarray],
        topology: _core.Topology | None = None,
        process: int = 0,
    ) -> ShardedArray:
        """An array from {device id: that device's slice} for each device of `process` (copied)."""
        name = dtype_name(dtype)
        topology = topology or _default_topology(sharding)
        np_dtype = numpy_dtype(name)
        devices = sharding.addressable_devices(topology, process)
        missing = [d for d in devices if d not in shards]
        if missing:
            from .errors import InvalidArgumentError

            raise InvalidArgumentError(f"no shard given for devices {missing} of process {process}")
        index = sharding.devices_indices_map(tuple(shape))
        data = []
        for d in devices:
            shard = np.asarray(shards[d], dtype=np_dtype)
            expected = tuple(len(range(*part.indices(n))) for part, n in zip(index[d], shape))
            if shard.shape != expected:
                from .errors import InvalidArgumentError

                raise InvalidArgumentError(f"the shard of device {d} has shape {shard.shape}, its slice needs {expected}")
            data.append(np.ascontiguousarray(shard.reshape(-1)).view(np.uint8))
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
        topology = topology or _default_topology(sharding)
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
        """
        dtype = numpy_dtype(self._array.dtype)
        index = self._array.sharding.devices_indices_map(self._array.shape)
        return [
            Shard(s.device, index[s.device], s._bytes().view(dtype).reshape(s.box.shape)) for s in self._array.shards
        ]

    addressable_shards = shards

    def shares_memory_with(self, other: ShardedArray) -> bool:
        """Whether every shard shares its buffer with `other`'s."""
        return self._array.shares_memory_with(other._array)

    def __repr__(self) -> str:
        return f"ShardedArray(shape={self.shape}, dtype={self.dtype}, sharding={self.sharding!r})"


def reshard(array: ShardedArray, sharding: _core.NamedSharding) -> ShardedArray:
    """The array laid out by `sharding`: any mesh, device order, device set or memory kind.

    When `sharding` equals the array's, nothing moves and the result shares its buffers.
    """
    return ShardedArray(_core._reshard(array._array, sharding))


def to_host(array: ShardedArray) -> np.ndarray:
    """The whole array as one numpy array (it owns reshard's host buffer; no extra copy)."""
    return _core._to_host(array._array).view(array.dtype).reshape(array.shape)


def from_host(
    host: Any, sharding: _core.NamedSharding, topology: _core.Topology | None = None
) -> ShardedArray:
    """A whole host array placed with `sharding`: each device gets its slice."""
    host = np.asarray(host)
    name = dtype_name(host.dtype)
    flat = np.ascontiguousarray(host.reshape(-1)).view(np.uint8)
    topology = topology or _default_topology(sharding)
    return ShardedArray(_core._from_host(flat, host.shape, name, sharding, topology))
