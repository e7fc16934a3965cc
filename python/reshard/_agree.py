"""Failing together: a collective call whose local preparation raises on one
process raises on every process, before anything moves, instead of leaving the
others waiting in the exchange until their peer timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from . import _core
from .errors import PeerFailedError

T = TypeVar("T")

# An error's text travels in the agreement's metadata: long enough to name a
# tensor and its layout, short enough to stay small metadata.
_MAX_MESSAGE = 2000


def _describe(error: BaseException) -> bytes:
    text = f"{type(error).__name__}: {error}"
    return text[:_MAX_MESSAGE].encode("utf-8", "replace")


def agreed(transport: _core.Transport | None, prepare: Callable[[], T]) -> T:
    """Runs `prepare()`, this process's local part of a collective call (no
    communication in it), then agrees on its outcome with every process of
    `transport`: if it raised anywhere, every process raises. A process whose
    own preparation failed raises its own error; the others raise
    PeerFailedError naming the first failed process and its error. One small
    all_gather per call; none without a transport or with one process."""
    if transport is None or transport.size == 1:
        return prepare()
    result: Any = None
    error: Exception | None = None
    try:
        result = prepare()
    except Exception as e:  # noqa: BLE001 - every failure must reach the other processes
        error = e
    gathered = transport.all_gather(b"" if error is None else _describe(error))
    if error is not None:
        raise error
    failed = [(rank, text.decode("utf-8", "replace")) for rank, text in enumerate(gathered) if text]
    if failed:
        rank, text = failed[0]
        more = f" (and {len(failed) - 1} more process(es))" if len(failed) > 1 else ""
        raise PeerFailedError(f"process {rank}{more} failed before the operation began, so nothing moved: {text}")
    return result
