"""Run by test_transport.py as a plain loop of processes (no mpirun, no JAX): each joins the
job with reshard.transport(), given rank, size and coordinator (argv: "explicit SEED",
from JOB_RANK, JOB_SIZE, JOB_COORDINATOR) or finding them in torchrun's environment
(argv: "auto SEED"), then
moves an array from one layout to another across the processes and checks every element
against numpy. Prints "rank R ok KIND RENDEZVOUS" and exits 0, or prints the error."""

from __future__ import annotations

import os
import sys
import traceback

import numpy as np


def main() -> int:
    import reshard

    seed = int(sys.argv[2])
    if sys.argv[1] == "explicit":
        t = reshard.transport(rank=int(os.environ["JOB_RANK"]), size=int(os.environ["JOB_SIZE"]),
                              coordinator=os.environ["JOB_COORDINATOR"], timeout=30)
    else:
        t = reshard.transport(timeout=30)
    try:
        values = np.random.default_rng(seed).standard_normal((16, 24)).astype(np.float32)
        topology = reshard.Topology.uniform(4 * t.size, t.size)
        mesh = reshard.Mesh(np.arange(4 * t.size).reshape(2, 2 * t.size), ("a", "b"))
        rows = reshard.from_host(values, reshard.NamedSharding(mesh, reshard.P("b", "a")), topology, transport=t)
        cols = reshard.reshard(rows, reshard.NamedSharding(mesh, reshard.P(None, ("a", "b"))), transport=t)
        whole = reshard.to_host(cols, transport=t)
        if whole.tobytes() != values.tobytes():
            raise AssertionError("the array came back with other bytes")
        if t.size > 1 and t.bytes_received == 0:
            raise AssertionError("nothing crossed between the processes")
        gathered = t.all_gather(bytes([t.rank]))
        if gathered != [bytes([r]) for r in range(t.size)]:
            raise AssertionError(f"all_gather gave {gathered}")
        sys.stdout.write(f"rank {t.rank} ok {t.kind} {t.rendezvous}\n")
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - reported, then the process fails
        sys.stdout.write(f"rank {t.rank} FAILED (RESHARD_SEED={seed})\n{traceback.format_exc()}\n")
        sys.stdout.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
