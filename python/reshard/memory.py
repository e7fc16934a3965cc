"""Memory reshard keeps after a call returns.

Freed buffers are kept for the next call's buffers of the same sizes (a training
step's arrays come back with the same shapes), so their pages need not be faulted
in and zeroed again: shared-memory buffers (which the processes of a host read
from each other) and staging buffers (for packed messages), each up to a bound,
256 MiB unless ``RESHARD_CACHED_MEMORY`` or :func:`set_cached_memory_limit` says
otherwise. Inside a training job, :func:`release_cached_memory` gives them back
to the kernel between steps that need the memory.
"""

from __future__ import annotations

from . import _core
from .pipelines import _byte_size

__all__ = ["cached_memory", "release_cached_memory", "set_cached_memory_limit"]


def cached_memory() -> dict[str, int]:
    """What the caches hold now, in bytes: ``{"shared_arena": ..., "staging": ...,
    "limit": ...}`` (``limit`` bounds each of the two)."""
    shared_arena, staging, limit = _core._cached_memory()
    return {"shared_arena": shared_arena, "staging": staging, "limit": limit}


def set_cached_memory_limit(limit: int | str) -> None:
    """Bounds each cache at `limit` bytes (an int, or a size such as ``"1GiB"``); a lower
    bound gives the excess back at once, and 0 keeps nothing."""
    _core._set_cached_memory_limit(_byte_size(limit, "limit"))


def release_cached_memory() -> None:
    """Gives every kept page back to the kernel now. The bound stays, so later calls
    fill the caches again."""
    _core._release_cached_memory()
