"""Python processes under mpirun form one job (reshard.mpi): at 2 and 4 ranks they
reshard, save, restore, convert, export and import a model together, each checking its own bytes."""

from __future__ import annotations

import pathlib
import re

import pytest

import reshard.mpi
from conftest import SEED
from mpi_launch import needs_mpirun, ranks_that_said, run

pytestmark = needs_mpirun


@pytest.mark.parametrize("ranks", [2, 4])
def test_python_processes_reshard_save_and_restore_together(tmp_path, ranks):
    done = run(pathlib.Path(__file__).with_name("mpi_job.py"), str(tmp_path), str(SEED), ranks=ranks)
    assert done.returncode == 0, f"RESHARD_SEED={SEED}\n{done.stdout}\n{done.stderr}"
    assert ranks_that_said(done.stdout, "ok") == list(range(ranks)), done.stdout
    # Together the ranks wrote each byte of the model once.
    written = sum(int(w) for w in re.findall(r"wrote (\d+) B", done.stdout))
    assert written == 32 * 16 * 4 + 16 * 8 * 2 + 16 * 8 + 4


# What mpirun/mpiexec (Open MPI, MPICH's Hydra), srun (PMIx) and MVAPICH set.
_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")


def test_without_a_launcher_mpi_is_not_assumed(monkeypatch):
    for name in _LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert not reshard.mpi.launched_by_mpi()
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "")  # set but empty: no launcher either
    assert not reshard.mpi.launched_by_mpi()


@pytest.mark.parametrize("name", _LAUNCHER_VARIABLES)
def test_each_launchers_variable_says_mpi_started_the_process(monkeypatch, name):
    for other in _LAUNCHER_VARIABLES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "2")
    assert reshard.mpi.launched_by_mpi()


def test_the_old_and_new_name_of_segment_bytes_together_are_refused():
    # Refused before MPI is touched; the old name alone is checked in mpi_job.py.
    with pytest.raises(TypeError, match="segment_bytes and chunk_bytes"):
        reshard.mpi.transport(segment_bytes=4096, chunk_bytes=4096)
