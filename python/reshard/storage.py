"""How reshard talks to object stores (``s3://``, ``gs://``): the Python side of ``--timeout``.

Credentials, regions and endpoints come from the environment, as the stores' own tools take
them (docs/storage.md). What is set here applies to every store client the process opens
from then on, in every function of the package::

    import reshard.storage
    reshard.storage.set_options(timeout=30)   # give up on a store silent for 30 s (default 120)
    reshard.storage.options()                 # StoreOptions(timeout=30.0, concurrency=8)
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

from . import _core
from .errors import ArgumentTypeError


class StoreOptions(NamedTuple):
    """What store clients open with: ``timeout`` (seconds without progress before a request,
    retried with backoff until then, fails) and ``concurrency`` (ranged requests in flight at
    once for one read)."""

    timeout: float
    concurrency: int


def options() -> StoreOptions:
    """The options store clients opened from now on use."""
    timeout, concurrency = _core._store_options()
    return StoreOptions(timeout, concurrency)


def set_options(*, timeout: float | None = None, concurrency: int | None = None) -> StoreOptions:
    """Sets ``timeout`` (seconds, at least 0.001) and/or ``concurrency`` (1 to 1024) for the store
    clients opened from now on; an argument left out keeps its value. Returns the options now
    in force. A value out of range is an InvalidArgumentError naming the argument."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)):
        raise ArgumentTypeError(f"timeout: expected seconds as a number, got {type(timeout).__name__}")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, numbers.Integral)):
        raise ArgumentTypeError(f"concurrency: expected an int, got {type(concurrency).__name__}")
    _core._set_store_options(None if timeout is None else float(timeout),
                             None if concurrency is None else int(concurrency))
    return options()
