"""reshard.transport(): the transport of the job this process is in, whatever started it.

With rank, size and coordinator given, it joins that TCP job. With none given it
picks, in order: an MPI launch (mpirun, srun) → ``reshard.mpi.transport()``; a
``jax.distributed`` job of more than one process → TCP, met through JAX's own
coordination service (its key-value store); torchrun's environment (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) → TCP at MASTER_ADDR:MASTER_PORT;
RESHARD_RANK / RESHARD_SIZE / RESHARD_COORDINATOR → TCP; otherwise a job of one.
The environment rules are the command line's (RESHARD_TRANSPORT, RESHARD_COORDINATOR
and RESHARD_BIND_ADDRESS included). The transport says what it is (``.kind``:
"mpi", "tcp", "none") and how its processes met (``.rendezvous``).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import sys
import threading
from typing import Any

from . import _core, _exit
from .errors import TransportTimeoutError, UnsupportedError

__all__ = ["job_transport", "transport"]

_log = logging.getLogger("reshard")

# Transports made through JAX's key-value store, numbered alike in every process
# (collective calls come in one order), so each one's keys are its own.
_jax_made = itertools.count()

_job: Any = None  # job_transport()'s, made once per process
_job_lock = threading.Lock()  # two threads' first calls must not make two (each would wait for the other's peers)


def _exit_if_given_up() -> None:
    """The first exit handler once a TCP transport gave up on a peer (armed by the C++ side as
    the error is raised). In a jax.distributed job, JAX's shutdown would wait for every process,
    the one given up on too, until JAX's own heartbeat gives up (minutes): the process ends
    here instead, with status 1, its output flushed."""
    if _exit.jax_distributed_running():  # else nothing waits for the peer: the exit goes on as it would
        _exit.end_now()


def _debug(message: str) -> None:
    if os.environ.get("RESHARD_LOG", "").lower() == "debug":
        # One write: print() writes the text and its newline apart, so the
        # lines of processes sharing a log would run into each other.
        sys.stderr.write(f"reshard: {message}\n")
        sys.stderr.flush()
    _log.debug(message)


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"reshard.transport: {name} must be an int, not {type(value).__name__}")
    return value


def _check_timeout(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"reshard.transport: timeout must be a number of seconds, not {type(timeout).__name__}")
    if not timeout > 0:
        raise ValueError(f"reshard.transport: timeout must be positive seconds, not {timeout}")
    return float(timeout)


def _bind_address(bind_address: str | None) -> str:
    return bind_address if bind_address is not None else os.environ.get("RESHARD_BIND_ADDRESS", "")


def _made(t: Any) -> Any:
    label = "" if t.size == 1 or not hasattr(t, "label_of") else f", the coordinator {t.label_of(0)}"
    _debug(f"transport {t.kind} (rendezvous {t.rendezvous}): rank {t.rank} of {t.size}{label}")
    return t


def _explicit(rank: int, size: int, coordinator: str, timeout: float, bind_address: str | None,
              rendezvous: str = "explicit") -> Any:
    rank, size = _check_int("rank", rank), _check_int("size", size)
    if not isinstance(coordinator, str):
        raise TypeError(f"reshard.transport: coordinator must be a 'host:port' str, not {type(coordinator).__name__}")
    if size < 1:
        raise ValueError(f"reshard.transport: size must be at least 1, not {size}")
    if not 0 <= rank < size:
        raise ValueError(f"reshard.transport: rank must be in [0, {size}), not {rank}")
    return _core._tcp_transport(rank, size, coordinator, "", _bind_address(bind_address), timeout, None, rendezvous)


def _jax_job() -> Any:
    """The jax module when this process is one of a multi-process jax.distributed job, else None."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        return jax if jax.process_count() > 1 else None
    except Exception:  # a JAX without a backend it can start: not a JAX job reshard can join
        return None


def _host_of(address: str) -> str:
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _through_jax(jax: Any, timeout: float, bind_address: str | None) -> Any:
    """TCP, met through JAX's coordination service: rank 0 listens on the host of JAX's
    coordinator and publishes its address and a fresh job token in JAX's key-value store."""
    from jax._src import distributed  # the coordination service's client has no public name

    state = distributed.global_state
    client = state.client
    if client is None or not state.coordinator_address:
        raise UnsupportedError("reshard.transport: JAX runs several processes but jax.distributed's client is not "
                               "initialised (call jax.distributed.initialize() first, or pass rank, size and "
                               "coordinator)")
    rank, size = jax.process_index(), jax.process_count()
    key = f"reshard/transport/{next(_jax_made)}"
    timeout_ms = max(1, int(timeout * 1000))
    if rank == 0:
        token = secrets.token_hex(16)
        client.key_value_set(f"{key}/token", token)
        return _core._tcp_transport(0, size, f"{_host_of(state.coordinator_address)}:0", token,
                                    _bind_address(bind_address), timeout,
                                    lambda address: client.key_value_set(f"{key}/address", address), "jax")
    try:
        token = client.blocking_key_value_get(f"{key}/token", timeout_ms)
        address = client.blocking_key_value_get(f"{key}/address", timeout_ms)
    except Exception as error:  # JAX raises its own (XlaRuntimeError) for a missed deadline
        raise TransportTimeoutError(
            f"reshard.transport: process 0 of the JAX job did not publish its address ({key}) in JAX's key-value "
            f"store within {timeout} s: {error}") from error
    return _core._tcp_transport(rank, size, address, token, _bind_address(bind_address), timeout, None, "jax")


def _from_environment(timeout: float, bind_address: str | None) -> Any:
    requested = os.environ.get("RESHARD_TRANSPORT", "auto")
    kind, rendezvous, rank, size, coordinator = _core._choose_launcher(requested)
    if kind == "mpi":
        from . import mpi

        return mpi.transport(timeout=timeout)
    if requested in ("auto", "tcp"):  # a JAX job's own processes come before torchrun's or reshard's variables
        jax = _jax_job()
        if jax is not None:
            return _through_jax(jax, timeout, bind_address)
    if kind == "tcp":
        return _explicit(rank, size, coordinator, timeout, bind_address, rendezvous)
    return _core._single_transport(rendezvous)


def transport(*, rank: int | None = None, size: int | None = None, coordinator: str | None = None,
              timeout: float = 60.0, bind_address: str | None = None) -> Any:
    """The transport between this job's processes (collective: every process calls it).

    ``rank``, ``size`` and ``coordinator`` ("host:port", where rank 0 listens and the others
    connect) join that TCP job; all three or none. With none, the job is the one this
    process was started in (see the module's doc): MPI, a jax.distributed job, torchrun,
    RESHARD_RANK/RESHARD_SIZE/RESHARD_COORDINATOR, or a job of one. ``timeout`` is the seconds
    the processes wait for each other to arrive and a silent peer is waited for
    (TransportTimeoutError naming it). ``bind_address`` is the local address data
    connections use (default: the one the coordinator is reached through;
    RESHARD_BIND_ADDRESS). The result has ``.kind`` and ``.rendezvous``.
    """
    timeout = _check_timeout(timeout)
    given = {"rank": rank, "size": size, "coordinator": coordinator}
    if any(v is not None for v in given.values()):
        missing = [name for name, value in given.items() if value is None]
        if missing:
            raise ValueError(f"reshard.transport: {', '.join(missing)} missing: rank, size and coordinator are "
                             "given together (or none, to join the job this process was started in)")
        return _made(_explicit(rank, size, coordinator, timeout, bind_address))  # type: ignore[arg-type]
    return _made(_from_environment(timeout, bind_address))


def job_transport() -> Any:
    """The job's transport (``transport()``), made on the first call and reused after."""
    global _job
    with _job_lock:
        if _job is None:
            _job = transport()
        return _job


def for_jax(transport: Any) -> Any:
    """`transport`, or, when it is None and JAX runs more than one process, the job's
    (``job_transport()``): what reshard.jax and reshard.orbax take None to mean."""
    if transport is None and _jax_job() is not None:
        return job_transport()
    return transport
