"""Run by test_lost_peer.py under ``mpirun -np N``: the ranks reshard an array back and forth
in a loop until the last rank stops itself (SIGSTOP) or is killed (SIGKILL) on the third
round, or, with "cut", until the test cuts the network between them (scripts/netns-hosts.sh).
Each survivor prints "rank R raised NAME", tries a new transport (refused once a peer
went silent: "rank R refused NAME"), and calls sys.exit(1), or with RESHARD_TEST_RERAISE=1 lets
the error end it; the job must then end. argv: how the last rank goes (stop, kill), where the
transport comes from (reshard, mpi4py, jax: reshard's, in a process that also runs
jax.distributed), the transport's timeout in seconds, a folder where each rank writes its
process id. With RESHARD_TEST_SAID_DIR set, each rank also writes what it prints to R.log
there: a rank whose link to mpirun was cut cannot print through it."""

from __future__ import annotations

import os
import pathlib
import signal
import sys

import numpy as np

import reshard
import reshard.mpi
from reshard import P


def say(rank: int, text: str) -> None:
    print(text, flush=True)
    said = os.environ.get("RESHARD_TEST_SAID_DIR")
    if said:
        with open(pathlib.Path(said) / f"{rank}.log", "a") as log:
            log.write(text + "\n")


def make_transport(source: str, timeout: float):
    if source == "mpi4py":
        from mpi4py import MPI

        return reshard.mpi.transport(MPI.COMM_WORLD, timeout=timeout)
    if source == "jax":
        import jax

        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize()  # finds Open MPI's launch by itself
    return reshard.mpi.transport(timeout=timeout)


def main() -> None:
    how, source, timeout, pids = sys.argv[1], sys.argv[2], float(sys.argv[3]), pathlib.Path(sys.argv[4])
    t = make_transport(source, timeout)
    rank, size = t.rank, t.size
    (pids / str(rank)).write_text(str(os.getpid()))
    topology = reshard.Topology.uniform(size, size)
    order = list(range(size))
    layouts = [reshard.NamedSharding(reshard.Mesh(np.array(o), ("x",)), P("x")) for o in (order, order[::-1])]
    array = reshard.from_host(np.arange(size * 1024, dtype=np.float32), layouts[0], topology, transport=t)
    try:
        for step in range(1_000_000):
            if step == 1 and how == "cut":  # the test cuts the link once every rank says so
                say(rank, f"rank {rank} looping")
            if step == 3 and rank == size - 1 and how != "cut":
                os.kill(os.getpid(), signal.SIGSTOP if how == "stop" else signal.SIGKILL)
            array = reshard.reshard(array, layouts[(step + 1) % 2], transport=t)
    except (reshard.errors.TransportTimeoutError, reshard.errors.PeerFailedError) as e:
        say(rank, f"rank {rank} raised {type(e).__name__}: {e}")
        if os.environ.get("RESHARD_TEST_RERAISE") == "1":
            raise
        if isinstance(e, reshard.errors.TransportTimeoutError):
            try:
                make_transport("reshard", timeout)
            except reshard.errors.PeerFailedError as refusal:
                say(rank, f"rank {rank} refused {type(refusal).__name__}: {refusal}")
        sys.exit(1)


if __name__ == "__main__":
    main()
