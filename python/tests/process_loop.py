"""Starting a job as TPU pods, ssh loops and torchrun start one: a plain loop of processes,
no mpirun, each told its place by its environment. Every job is bounded: past its
timeout every process is killed and the test fails with their output."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

# Settings pytest's own JAX uses (conftest.py) that a launched script must choose itself.
_JAX_SETTINGS = ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the job binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_loop(script: pathlib.Path | str, *args: str, processes: int, env_of: Callable[[int], dict[str, str]],
             timeout: float) -> tuple[list[int], str]:
    """`script` with `args` in `processes` processes, process i with env_of(i) added to the
    environment; their exit statuses and their output (each process's, in order, labelled),
    once all ended or `timeout` seconds passed (then every one left is killed: status -9)."""
    base = {k: v for k, v in os.environ.items() if k not in _JAX_SETTINGS}
    # Files, not pipes: a process whose pipe nobody reads yet would block on a full one.
    logs = [tempfile.TemporaryFile() for _ in range(processes)]
    procs = [subprocess.Popen([sys.executable, str(script), *args], env={**base, **env_of(i)}, stdout=log,
                              stderr=subprocess.STDOUT) for i, log in enumerate(logs)]
    deadline = time.monotonic() + timeout
    killed = False
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            proc.wait()
            killed = True
    outputs = []
    for i, (proc, log) in enumerate(zip(procs, logs)):
        proc.wait()
        log.seek(0)
        text = log.read().decode(errors="replace")
        log.close()
        outputs.append(f"--- process {i} (status {proc.returncode}) ---\n{text}")
    if killed:
        outputs.append(f"(killed: the job ran past {timeout} s)")
    return [proc.returncode for proc in procs], "\n".join(outputs)
