"""Python jobs across two network-namespace hosts (scripts/netns-hosts.sh), each script under
tests/netns saying what it checks:

- python_cut_test.sh: a failed job ends across hosts too. Python ranks under mpirun reshard in a
  loop until the link between the hosts is cut; every rank raises naming a rank across the cut,
  every rank ends, and the job fails within the timeout and a bound, with reshard's transport,
  mpi4py's communicator and in a JAX job.
- jax_tcp_test.sh: a JAX job without mpirun (each process started on its host by itself, as TPU
  pods start them): reshard.jax with no transport= moves random layout pairs between the hosts
  as jax.device_put and numpy do; then a cut link ends every process, each naming a peer.

Here rather than in ctest because they need the installed package, which the test command
builds after its ctest stage."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from capability import import_or_skip, skip_without
from mpi_launch import needs_mpirun

REPO = pathlib.Path(__file__).resolve().parents[2]
SKIPPED = 77  # the scripts' exit status where the machine cannot make network namespaces


def run_script(name: str) -> str:
    reshard_binary = os.path.join(os.path.dirname(sys.executable), "reshard")
    done = subprocess.run(["bash", str(REPO / "tests" / "netns" / name), reshard_binary, sys.executable],
                          capture_output=True, text=True, errors="replace", timeout=400)
    if done.returncode == SKIPPED:
        skip_without("network namespaces", done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_mpirun
def test_a_link_cut_ends_every_python_rank_and_the_mpirun_job():
    import_or_skip("mpi4py")
    said = run_script("python_cut_test.sh")
    for source in ("reshard", "mpi4py", "jax"):  # reshard's transport, mpi4py's, a JAX job
        assert f"ok: {source}: a link cut mid-job" in said, said


def test_a_jax_job_without_mpirun_moves_arrays_between_hosts_and_ends_when_cut():
    said = run_script("jax_tcp_test.sh")
    assert "ok: a JAX job of 2 hosts without mpirun" in said, said
    assert "ok: a link cut mid-loop ends every process of the JAX job" in said, said
