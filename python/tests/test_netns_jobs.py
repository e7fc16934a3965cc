"""A failed job ends across hosts too: Python ranks under mpirun on two network-namespace hosts
(scripts/netns-hosts.sh) reshard in a loop until the link between the hosts is cut; every rank
raises naming a rank across the cut, every rank ends, and the job fails within the timeout and a
bound, with reshard's transport, mpi4py's communicator and in a JAX job
(tests/netns/python_cut_test.sh says what it checks). Here rather than in ctest because it needs
the installed package, which the test command builds after its ctest stage."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from capability import import_or_skip, skip_without
from mpi_launch import needs_mpirun

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "netns" / "python_cut_test.sh"
SKIPPED = 77  # the script's exit status where the machine cannot make network namespaces

pytestmark = needs_mpirun


def test_a_link_cut_ends_every_python_rank_and_the_job():
    import_or_skip("mpi4py")
    reshard_binary = os.path.join(os.path.dirname(sys.executable), "reshard")
    done = subprocess.run(["bash", str(SCRIPT), reshard_binary, sys.executable], capture_output=True, text=True,
                          errors="replace", timeout=400)
    if done.returncode == SKIPPED:
        skip_without("network namespaces", done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    assert done.returncode == 0, done.stdout + done.stderr
    for source in ("reshard", "mpi4py", "jax"):  # reshard's transport, mpi4py's, a JAX job
        assert f"ok: {source}: a link cut mid-job" in done.stdout, done.stdout
