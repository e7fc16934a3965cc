"""Ending a process whose job lost a peer, for the transports' exit handlers (reshard.mpi's and
the job transport's): nothing at exit may wait for a process that is gone."""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def jax_distributed_running() -> bool:
    """Whether this process is in a jax.distributed job, whose shutdown waits for every process."""
    jax = sys.modules.get("jax")
    distributed = getattr(jax, "distributed", None)
    return bool(distributed is not None and distributed.is_initialized())


def end_now() -> NoReturn:
    """Ends the process with status 1, its output flushed, running no further exit handler."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: nothing more to say there
            pass
    os._exit(1)
