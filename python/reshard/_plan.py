"""reshard.plan: the transfers between two layouts of one array."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _core
from ._dtypes import dtype_name


def plan(
    shape: Sequence[int],
    dtype: Any,
    src: _core.NamedSharding,
    dst: _core.NamedSharding,
    topology: _core.Topology,
) -> _core.Plan:
    """The plan that builds `dst`'s layout of an array from `src`'s.

    `dtype` is a numpy dtype (or a safetensors name such as "bf16"). Every
    process computes the same plan from the same arguments. Each target element
    is fetched once, from the nearest source replica: the same device, then the
    same process, then the least-loaded remote process. Raises the layout
    errors of spec/sharding.md, UnknownDeviceError for a device outside
    `topology`.
    """
    return _core._plan(tuple(shape), dtype_name(dtype), src, dst, topology)
