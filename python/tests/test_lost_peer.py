"""A job whose peer goes silent (SIGSTOP) or dies (SIGKILL) ends: under real mpirun, every
surviving Python rank raises within the transport's timeout, and every process has exited
and mpirun has returned non-zero within the timeout and a few seconds more, whether the
transport was made by reshard or from an mpi4py communicator, and in a JAX job too.
Before, exiting ran MPI's finalize, which waited forever for the silent peer."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from capability import import_or_skip
from mpi_launch import needs_mpirun, ranks_that_said, run

pytestmark = needs_mpirun

JOB = pathlib.Path(__file__).with_name("lost_peer_job.py")
TIMEOUT_S = 2.0
# Start-up (a JAX runtime's included), the timeout, and the launcher's teardown, with room to spare on 2 busy cores.
BOUND_S = 45.0


def still_running(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def run_job(tmp_path, ranks: int, how: str, source: str, *launcher_args: str):
    if source == "mpi4py":
        import_or_skip("mpi4py")
    if source == "jax":
        import_or_skip("jax")
    start = time.monotonic()
    done = run(JOB, how, source, str(TIMEOUT_S), str(tmp_path), ranks=ranks, timeout=BOUND_S + 30,
               launcher=list(launcher_args))
    pids = [int(p.read_text()) for p in tmp_path.iterdir()]
    assert len(pids) == ranks, done.stdout + done.stderr
    # mpirun may return while it still tears down a rank it had to wake (the stopped one): every rank
    # must be gone within the bound, counted from the job's start.
    while [pid for pid in pids if still_running(pid)] and time.monotonic() - start < BOUND_S:
        time.sleep(0.1)
    elapsed = time.monotonic() - start
    assert [pid for pid in pids if still_running(pid)] == [], f"{pids}\n{done.stdout}\n{done.stderr}"
    assert elapsed < BOUND_S, f"took {elapsed:.1f} s\n{done.stdout}\n{done.stderr}"
    return done


# One JAX job size: its start-up costs seconds per rank.
@pytest.mark.parametrize(("ranks", "source"), [(2, "reshard"), (4, "reshard"), (2, "mpi4py"), (4, "mpi4py"),
                                               (3, "jax")])
def test_a_silent_peer_ends_the_job(tmp_path, ranks, source):
    done = run_job(tmp_path, ranks, "stop", source)
    assert done.returncode != 0, done.stdout + done.stderr
    # (mpirun wakes the stopped rank as it ends the job: it may raise too.)
    assert set(range(ranks - 1)) <= set(ranks_that_said(done.stdout, "raised")), done.stdout + done.stderr
    # A rank that timed out on the silent peer is told it cannot make a new transport.
    timed_out = sorted(int(r) for r in re.findall(r"rank (\d+) raised TransportTimeoutError", done.stdout))
    assert timed_out, done.stdout
    assert set(timed_out) <= set(ranks_that_said(done.stdout, "refused PeerFailedError")), done.stdout


def test_a_killed_peer_ends_the_job(tmp_path):
    done = run_job(tmp_path, 3, "kill", "reshard")
    assert done.returncode != 0, done.stdout + done.stderr


@pytest.mark.parametrize("reraise", [False, True])
def test_survivors_of_a_killed_peer_raise_and_exit_with_their_status(tmp_path, reraise):
    # With recovery on, mpirun leaves the survivors to find the loss themselves; each rank's
    # shell writes the status its Python process exited with.
    pids, statuses = tmp_path / "pids", tmp_path / "statuses"
    pids.mkdir()
    statuses.mkdir()
    script = (f'"{sys.executable}" "{JOB}" kill reshard {TIMEOUT_S} "{pids}"; '
              f'echo $? > "{statuses}/$OMPI_COMM_WORLD_RANK"')
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               RESHARD_TEST_RERAISE="1" if reraise else "0")
    start = time.monotonic()
    done = subprocess.run(["mpirun", "-np", "3", "--oversubscribe", "--enable-recovery", "sh", "-c", script],
                          capture_output=True, text=True, errors="replace", timeout=BOUND_S + 30, env=env)
    assert time.monotonic() - start < BOUND_S, done.stdout + done.stderr
    assert ranks_that_said(done.stdout, "raised") == [0, 1], done.stdout + done.stderr
    assert {p.name: p.read_text().strip() for p in statuses.iterdir()} == {"0": "1", "1": "1", "2": "137"}, done.stderr
    if reraise:
        assert done.stderr.count("Traceback (most recent call last)") == 2, done.stderr
