"""Launching a Python script as an MPI job (or as one plain process) from a test: the
environment mpirun needs as root, the scripts' own JAX settings, and a skip where there
is no MPI (a failure where every capability is required: capability.py)."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import reshard.mpi
from capability import needs

def mpi_missing() -> bool:
    return not reshard.mpi.available() or shutil.which("mpirun") is None


needs_mpirun = needs(mpi_missing(), "MPI (reshard built with it, and mpirun)",
                     "reshard built without MPI, or no mpirun")

# Settings pytest's own JAX uses (conftest.py) that a launched script must choose itself.
_JAX_SETTINGS = ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64")


def run(script: pathlib.Path | str, *args: str, ranks: int = 0, env: dict[str, str] | None = None,
        cwd: pathlib.Path | None = None, timeout: float = 300,
        launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    """`script` with `args` under ``mpirun -np ranks`` (0: as one plain process; `launcher`: more
    of mpirun's options), with
    pytest's JAX settings left out unless `env` gives its own. Output is text, a byte
    that is not UTF-8 replaced: the processes share one pipe and may cut a character."""
    environment = {k: v for k, v in os.environ.items() if k not in _JAX_SETTINGS}
    environment.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **(env or {}))
    command = [sys.executable, str(script), *args]
    if ranks:
        command = ["mpirun", "-np", str(ranks), "--oversubscribe", *(launcher or []), *command]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=timeout,
                          env=environment)


def ranks_that_said(output: str, words: str) -> list[int]:
    """The ranks that printed "rank R WORDS", sorted. The processes share one pipe, so a line
    may run into the next process's."""
    return sorted(int(r) for r in re.findall(rf"rank (\d+) {re.escape(words)}(?=rank |\W|$)", output))
