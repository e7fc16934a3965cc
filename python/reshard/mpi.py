"""Multi-process reshard under MPI: the Python processes that ``mpirun`` (or ``srun``) starts form one job.

    import reshard, reshard.mpi
    t = reshard.mpi.transport()          # collective: every rank calls it
    topology = reshard.Topology.uniform(8, t.size)
    a = reshard.from_host(values, sharding, topology, transport=t)
    b = reshard.reshard(a, other, transport=t)
    reshard.save_checkpoint("ckpt", {"w": b}, transport=t)

``session()`` initialises MPI once (asking for MPI_THREAD_MULTIPLE) and is
finalised when the interpreter exits, after every transport is closed, as MPI
requires (whatever Python objects still hold them).

After a transport gave up on a peer (TransportTimeoutError, PeerFailedError),
nothing waits for that peer at exit: MPI_Finalize, which waits for every
process of the job, is skipped, so the process ends with the status the program
asked for and the launcher ends the job. Where something else would still wait
at exit (MPI initialised by mpi4py, which finalises it; a ``jax.distributed``
runtime, whose shutdown waits for every process), the process ends with status
1 before any other exit handler runs. A transport made after a peer went silent
is refused (PeerFailedError): MPI cannot build a communicator without it. ``transport(comm)`` takes an mpi4py communicator when the program
already has one. Available when the extension was built with MPI
(``available()``); on a build without, the functions raise UnsupportedError.
"""

from __future__ import annotations

import atexit
import warnings
from typing import Any

from . import _core, _exit
from .errors import UnsupportedError

__all__ = ["Session", "available", "launched_by_mpi", "session", "transport"]

_started = False


class Session:
    """This process's place in the MPI job (what ``session()`` returns)."""

    @property
    def rank(self) -> int:
        """This process's rank in MPI_COMM_WORLD."""
        return _core._mpi_world_rank()

    @property
    def size(self) -> int:
        """The number of processes in MPI_COMM_WORLD."""
        return _core._mpi_world_size()

    @property
    def thread_level(self) -> int:
        """The thread level MPI provides (3 is MPI_THREAD_MULTIPLE)."""
        return _core._mpi_thread_level()

    @property
    def owns_mpi(self) -> bool:
        """Whether reshard initialised MPI (and so finalises it at exit); not when mpi4py did."""
        return _core._mpi_owns()

    def __repr__(self) -> str:
        return f"reshard.mpi.Session(rank={self.rank}, size={self.size})"


def available() -> bool:
    """Whether this build of reshard has the MPI transport."""
    return bool(_core._mpi_available)


def _require() -> None:
    if not available():
        raise UnsupportedError("this reshard was built without MPI (install libopenmpi-dev and rebuild)")


def launched_by_mpi() -> bool:
    """Whether an MPI launcher (mpirun, mpiexec, srun) started this process."""
    return available() and _core._launched_by_mpi()


def session(peer_timeout: float = 60.0) -> Session:
    """The process's MPI session: MPI initialised on the first call (unless mpi4py or the
    program already did), finalised at exit. `peer_timeout` is the seconds a silent peer is
    waited for before it is taken for dead (TransportTimeoutError naming it)."""
    global _started
    _require()
    if not _started:
        _core._mpi_init(peer_timeout)
        _started = True
        atexit.register(_finalize)
    return Session()


def transport(comm: Any = None, segment_bytes: int | None = None, max_bytes_in_flight: int | None = None,
              timeout: float = 0.0, *, chunk_bytes: int | None = None) -> _core.Transport:
    """A transport between the processes of MPI_COMM_WORLD, or of `comm` (an mpi4py communicator).

    A message larger than `segment_bytes` goes as several MPI messages of at most that size.
    `segment_bytes` and `max_bytes_in_flight` default to the C++ MpiTransportOptions'
    (``_core.DEFAULT_MPI_SEGMENT_BYTES``, 8 MiB, and ``_core.DEFAULT_MPI_BYTES_IN_FLIGHT``, 128 MiB).
    `chunk_bytes` is the old name of `segment_bytes` (deprecated).

    Collective: every process of the communicator calls it. Traffic runs on
    communicators of its own, so it never mixes with the caller's messages.
    `timeout` 0 takes the session's peer timeout. ``close()`` releases it early.
    """
    if chunk_bytes is not None:
        if segment_bytes is not None:
            raise TypeError("transport() got both segment_bytes and chunk_bytes, its old name; "
                            "give segment_bytes alone")
        warnings.warn("reshard.mpi.transport(chunk_bytes=) is now segment_bytes=", DeprecationWarning, stacklevel=2)
        segment_bytes = chunk_bytes
    session()
    handle = None
    if comm is not None:
        from mpi4py import MPI  # only when the caller has an mpi4py communicator

        handle = MPI._handleof(comm)
    segment_bytes = _core.DEFAULT_MPI_SEGMENT_BYTES if segment_bytes is None else segment_bytes
    max_bytes_in_flight = _core.DEFAULT_MPI_BYTES_IN_FLIGHT if max_bytes_in_flight is None else max_bytes_in_flight
    return _core._mpi_transport(handle, segment_bytes, max_bytes_in_flight, timeout)


def _finalize() -> None:
    global _started
    _core._mpi_finalize()  # closes every transport first
    _started = False


def _others_wait_at_exit() -> bool:
    """Whether an exit handler other than reshard's would wait for every process: mpi4py's
    MPI_Finalize (MPI initialised by someone else) or jax.distributed's shutdown."""
    if not _core._mpi_owns():
        return True
    return _exit.jax_distributed_running()


def _exit_if_given_up() -> None:
    """The first exit handler once a transport gave up on a peer (armed by the C++ side as the
    error is raised): ends the process rather than let anything wait for that peer."""
    global _started
    if not _started or not _core._mpi_gave_up():
        return
    cut_short = _others_wait_at_exit()
    _finalize()  # closes the transports; the session skips MPI_Finalize
    if cut_short:
        _exit.end_now()
