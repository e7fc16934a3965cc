"""reshard.jax in multi-process JAX jobs started without mpirun, as TPU pods and ssh loops
start them: a plain loop of 2 or 4 processes, each calling jax.distributed.initialize()
with the coordinator's address, its count and its index (4 CPU devices each). No call
passes transport=: reshard.jax uses the job's own (TCP, met through JAX's coordination
service). The job script and its assertions are test_jax_job.py's (jax_job.py); checkpoints
pass between jobs of 4, 2 and 1 processes, and exports equal a single process's."""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest

import reshard.jax as rjax
from conftest import SEED
from jax_job import EXPORT_MAP, flat, model_shardings, model_values, nest, pairs_checked
from mpi_launch import ranks_that_said
from process_loop import free_port, run_loop

SCRIPT = pathlib.Path(__file__).with_name("jax_job.py")
PAIRS = 40


def launch(processes: int, folder: pathlib.Path, *phases: str) -> str:
    """jax_job.py's `phases` in a loop of `processes` processes; its output, once every one passed each."""
    port = free_port()
    statuses, output = run_loop(
        SCRIPT, str(folder), str(SEED), *phases, processes=processes, timeout=120,
        env_of=lambda i: {"JAX_JOB_COORDINATOR": f"127.0.0.1:{port}", "JAX_JOB_PROCESSES": str(processes),
                          "JAX_JOB_PROCESS_ID": str(i), "RESHARD_LOG": "debug"})
    report = f"RESHARD_SEED={SEED}\n{output}"
    assert statuses == [0] * processes, report
    for phase in phases:
        passed = ranks_that_said(output, f"ok {phase}")
        assert passed == list(range(processes)), f"phase {phase}: passed on ranks {passed}\n{report}"
    # What the job's transport is and how it met, said by every process (RESHARD_LOG=debug).
    said = output.count("reshard: transport tcp (rendezvous jax): rank ")
    assert said == processes, report
    return output


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("jax-job-tcp")


@pytest.fixture(scope="module")
def four_process_job(folder) -> str:
    return launch(4, folder, f"layouts:{PAIRS}", "save", "export")


@pytest.fixture(scope="module")
def two_process_job(folder, four_process_job) -> str:
    return launch(2, folder, f"layouts:{PAIRS}", "restore:4", "export", "unpublished")


def test_four_processes_move_random_layouts_to_from_host_and_save(four_process_job):
    assert pairs_checked(four_process_job) == PAIRS


def test_two_processes_move_random_layouts_and_restore_what_four_saved(two_process_job):
    assert pairs_checked(two_process_job) == PAIRS


def test_one_process_restores_what_four_saved(folder, four_process_job):
    values = model_values(SEED)
    devices = jax.devices()[:8]
    for name, order in (("ckpt-4", [7, 6, 5, 4, 3, 2, 1, 0]), ("ckpt-4-async", list(range(8)))):
        shardings = model_shardings(devices, order, 2, 1)
        restored = flat(rjax.restore(folder / name, nest(shardings)))
        for key, want in values.items():
            assert restored[key].sharding == shardings[key]
            assert np.asarray(restored[key]).tobytes() == want.tobytes(), f"{name} {key}"


def files_of(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("processes", [2, 4])
def test_an_export_equals_a_single_process_export(folder, two_process_job, processes, tmp_path):
    values = model_values(SEED)
    shardings = model_shardings(jax.devices()[:8], list(range(8)), 2, 0)
    tree = nest({k: jax.device_put(values[k], shardings[k]) for k in values})
    rjax.export(tree, tmp_path / "export-1", EXPORT_MAP, hf_config={"model_type": "test"}, max_shard_size="2KiB")
    ours, theirs = files_of(tmp_path / "export-1"), files_of(folder / f"export-{processes}")
    assert len(ours) > 2 and sorted(theirs) == sorted(ours)
    for name in ours:
        assert theirs[name] == ours[name], f"{name} differs (RESHARD_SEED={SEED})"
