"""JAX's device ids and reshard's dense device numbers, mapped both ways.

reshard numbers the devices of a job 0..N-1 (a Topology indexes by them);
JAX's ids need not be dense: in a multi-process CPU job process p's devices
start at p * 2048, and GPU and TPU ids have gaps too. reshard device d is the
d-th smallest JAX id, so every process, seeing the same global device list,
numbers alike, and the numbering keeps JAX's order (process 0's devices first
on a pod).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import UnknownDeviceError


class DeviceIds:
    """The mapping for one list of JAX devices (every process's)."""

    def __init__(self, devices: Any) -> None:
        by_id = {d.id: d for d in devices}
        if len(by_id) != len(devices):
            raise UnknownDeviceError(f"the device list names some JAX device ids twice: {[d.id for d in devices]}")
        self.jax_ids = np.array(sorted(by_id), dtype=np.int64)
        self.devices = [by_id[i] for i in self.jax_ids.tolist()]

    def __len__(self) -> int:
        return len(self.devices)

    def dense(self, jax_ids: Any) -> np.ndarray:
        """reshard's numbers of `jax_ids` (any shape); UnknownDeviceError naming the ids JAX's list lacks."""
        ids = np.asarray(jax_ids, dtype=np.int64)
        where = np.searchsorted(self.jax_ids, ids)
        found = where < len(self.jax_ids)
        found[found] = self.jax_ids[where[found]] == ids[found]
        if not found.all():
            missing = sorted(set(ids[~found].tolist()))
            raise UnknownDeviceError(f"JAX devices {missing} are not among the job's devices "
                                     f"({_id_ranges(self.jax_ids.tolist())})")
        return where

    def dense_one(self, jax_id: int) -> int:
        return int(self.dense([jax_id])[0])

    def jax_id(self, dense: int) -> int:
        """JAX's id of reshard device `dense`."""
        return int(self.jax_ids[self._checked(dense)])

    def device(self, dense: int) -> Any:
        """The jax.Device that is reshard device `dense`."""
        return self.devices[self._checked(dense)]

    def label(self, dense: int) -> str:
        return str(self.jax_id(dense))

    def _checked(self, dense: int) -> int:
        if not 0 <= dense < len(self.devices):
            raise UnknownDeviceError(f"reshard device {dense} is not in the job (it has {len(self.devices)} devices: "
                                     f"JAX ids {_id_ranges(self.jax_ids.tolist())})")
        return dense


def _id_ranges(ids: list[int]) -> str:
    """Sorted ids as runs: ``0..3, 2048..2051``."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)
