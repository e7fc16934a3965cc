"""reshard.jax inside real multi-process JAX jobs: mpirun starts 2 or 4 Python processes,
each calls jax.distributed.initialize() (4 CPU devices, ids p*2048..) and reshard.mpi,
and they run jax_job.py's phases together; checkpoints pass between jobs of 1, 2 and 4
processes."""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest

import reshard.jax as rjax
from conftest import SEED
from jax_job import flat, model_shardings, model_values, nest, pairs_checked
from mpi_launch import needs_mpirun, ranks_that_said, run

pytestmark = needs_mpirun

SCRIPT = pathlib.Path(__file__).with_name("jax_job.py")


def launch(ranks: int, folder: pathlib.Path, *phases: str) -> str:
    """Runs jax_job.py's `phases` in a job of `ranks` processes; its output, once every rank passed each."""
    done = run(SCRIPT, str(folder), str(SEED), *phases, ranks=ranks, timeout=600)
    report = f"RESHARD_SEED={SEED}\n{done.stdout}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, report
    for phase in phases:
        passed = ranks_that_said(done.stdout, f"ok {phase}")
        assert passed == list(range(ranks)), f"phase {phase}: passed on ranks {passed}\n{report}"
    return done.stdout


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("jax-job")


@pytest.fixture(scope="module")
def two_process_job(folder) -> str:
    return launch(2, folder, "layouts:100", "save")


@pytest.fixture(scope="module")
def four_process_job(folder, two_process_job) -> str:
    return launch(4, folder, "layouts:100", "restore:2", "save")


def test_two_processes_move_random_layouts_save_and_fail_together(two_process_job):
    assert pairs_checked(two_process_job) == 100


def test_four_processes_move_random_layouts_and_restore_what_two_saved(four_process_job):
    assert pairs_checked(four_process_job) == 100


def test_two_processes_restore_what_four_saved(folder, four_process_job):
    launch(2, folder, "restore:4")


@pytest.mark.parametrize("saved_by", [2, 4])
def test_one_process_restores_what_a_job_saved(folder, four_process_job, saved_by):
    values = model_values(SEED)
    devices = jax.devices()[:8]
    for name, order in ((f"ckpt-{saved_by}", [7, 6, 5, 4, 3, 2, 1, 0]), (f"ckpt-{saved_by}-async", list(range(8)))):
        shardings = model_shardings(devices, order, 2, 1)
        restored = flat(rjax.restore(folder / name, nest(shardings)))
        for key, want in values.items():
            assert restored[key].sharding == shardings[key]
            assert np.asarray(restored[key]).tobytes() == want.tobytes(), f"{name} {key}"
