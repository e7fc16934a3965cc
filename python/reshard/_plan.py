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
    *,
    fan_out: bool = True,
    balance_senders: bool = True,
) -> _core.Plan:
    """The plan that builds `dst`'s layout of an array from `src`'s.

    `dtype` is a numpy dtype (or a safetensors name such as "bf16"). Every
    process computes the same plan from the same arguments. Each target element
    is fetched once, from the nearest source replica: the same device, then the
    same process, then a remote process. With `fan_out`, a remote piece that
    several devices of one process need crosses into that process once (to
    one of them, stage 0) and the others copy it from there (stage 1); with
    `balance_senders`, a piece several processes hold is split over them so
    the largest sender sends the least. Both off is the per-device plan, a
    baseline. Raises the layout
    errors (LayoutError subclasses), UnknownDeviceError for a device outside
    `topology`.
    """
    options = _core.PlanOptions()
    options.fan_out = fan_out
    options.balance_senders = balance_senders
    return _core._plan(tuple(shape), dtype_name(dtype), src, dst, topology, options)
