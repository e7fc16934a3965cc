"""The benchmark script at tiny sizes, so it cannot rot (the figures themselves come from
running it by hand at its default sizes; pytest collects only python/tests)."""

from __future__ import annotations

import pathlib

from mpi_launch import needs_mpirun, run

EIGHT_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}


def test_bench_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_python.py"
    done = run(script, "--read-mib", "1", "--put-mib", "1", "--repeat", "1", "--calls", "5", env=EIGHT_DEVICES)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for figure in ("safetensors.numpy.load_file", "reshard.jax.device_put", "us per call", "ratio"):
        assert figure in done.stdout, done.stdout


@needs_mpirun
def test_bench_multi_process_mode_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_python.py"
    done = run(script, "--put-mib", "1", "--ckpt-mib", "1", "--repeat", "1", ranks=2)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    for figure in ("one JAX job: 2 processes", "process_allgather", "reshard.jax.to_host(root=0)", "p1 ",
                   "TPU order -> natural order", "rows -> columns", "orbax save", "reshard restore onto others",
                   "ratio"):
        assert figure in done.stdout, done.stdout


def test_orbax_bench_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_orbax.py"
    done = run(script, "--layers", "1", "--embed", "32", "--vocab", "64", "--repeat", "1", env=EIGHT_DEVICES)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for figure in ("StandardCheckpointer.restore", "reshard.orbax.restore", "reshard.orbax.export", "ratio"):
        assert figure in done.stdout, done.stdout
