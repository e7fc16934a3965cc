"""The benchmark script at tiny sizes, so it cannot rot (the figures themselves come from
running it by hand at its default sizes; pytest collects only python/tests)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import reshard.mpi


def test_bench_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_python.py"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    done = subprocess.run([sys.executable, str(script), "--read-mib", "1", "--put-mib", "1", "--repeat", "1",
                           "--calls", "5"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for figure in ("safetensors.numpy.load_file", "reshard.jax.device_put", "us per call", "ratio"):
        assert figure in done.stdout, done.stdout


@pytest.mark.skipif(not reshard.mpi.available() or shutil.which("mpirun") is None,
                    reason="reshard built without MPI, or no mpirun")
def test_bench_multi_process_mode_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_python.py"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for inherited in ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64"):  # the job sets its own
        env.pop(inherited, None)
    done = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, str(script), "--put-mib", "1",
                           "--ckpt-mib", "1", "--repeat", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    for figure in ("one JAX job: 2 processes", "process_allgather", "reshard.jax.to_host(root=0)", "p1 ",
                   "TPU order -> natural order", "rows -> columns", "orbax save", "reshard restore onto others",
                   "ratio"):
        assert figure in done.stdout, done.stdout


def test_orbax_bench_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_orbax.py"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    done = subprocess.run([sys.executable, str(script), "--layers", "1", "--embed", "32", "--vocab", "64",
                           "--repeat", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for figure in ("StandardCheckpointer.restore", "reshard.orbax.restore", "reshard.orbax.export", "ratio"):
        assert figure in done.stdout, done.stdout
