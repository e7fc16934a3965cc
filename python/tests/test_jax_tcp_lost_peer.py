"""A JAX job started without mpirun whose peer dies (SIGKILL) or goes silent (SIGSTOP) ends:
the other process raises reshard's error naming the peer within the transport's timeout, and
exits (status 1) at once instead of waiting in jax.distributed's shutdown for the peer it
lost, which lasts until JAX's own heartbeat gives up (minutes)."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import SEED
from process_loop import free_port

SCRIPT = pathlib.Path(__file__).with_name("jax_job.py")
TIMEOUT_S = 3
# Start-up of two JAX runtimes on 2 busy cores, the timeout, and the exit, with room to spare.
BOUND_S = 30.0
JAX_SETTINGS = ("JAX_PLATFORMS", "XLA_FLAGS", "RESHARD_RANK", "RESHARD_SIZE", "RESHARD_COORDINATOR")


def start(i: int, port: int, folder: pathlib.Path, log) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in JAX_SETTINGS}
    env.update(JAX_JOB_COORDINATOR=f"127.0.0.1:{port}", JAX_JOB_PROCESSES="2", JAX_JOB_PROCESS_ID=str(i))
    return subprocess.Popen([sys.executable, str(SCRIPT), str(folder), str(SEED), f"cut:{TIMEOUT_S}"], env=env,
                            stdout=log, stderr=subprocess.STDOUT)


def text_of(log) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
def test_the_survivor_raises_naming_the_peer_and_exits(tmp_path, how):
    port = free_port()
    logs = [tempfile.TemporaryFile() for _ in range(2)]
    procs = [start(i, port, tmp_path, log) for i, log in enumerate(logs)]
    try:
        deadline = time.monotonic() + 90
        while not all("looping" in text_of(log) for log in logs):
            assert all(p.poll() is None for p in procs), "\n".join(text_of(log) for log in logs)
            assert time.monotonic() < deadline, "the processes did not start moving arrays in 90 s"
            time.sleep(0.1)
        procs[1].send_signal(how)
        lost_at = time.monotonic()
        try:
            status = procs[0].wait(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"process 0 was still running {BOUND_S} s after its peer was lost:\n{text_of(logs[0])}")
        took = time.monotonic() - lost_at
        said = text_of(logs[0])
        assert status == 1, f"status {status}\n{said}"
        assert "rank 0 FAILED" in said, said
        error = "TransportTimeoutError" if how == signal.SIGSTOP else "(PeerFailedError|TransportTimeoutError)"
        assert re.search(rf"reshard\.errors\.{error}: .*rank 1 \(", said), said
        print(f"process 0 ended {took:.1f} s after its peer was {'killed' if how == signal.SIGKILL else 'stopped'}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
