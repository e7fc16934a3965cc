"""The benchmark script at tiny sizes, so it cannot rot (the figures themselves come from
running it by hand at its default sizes; pytest collects only python/tests)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys


def test_bench_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_python.py"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    done = subprocess.run([sys.executable, str(script), "--read-mib", "1", "--put-mib", "1", "--repeat", "1",
                           "--calls", "5"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for figure in ("safetensors.numpy.load_file", "reshard.jax.device_put", "us per call", "ratio"):
        assert figure in done.stdout, done.stdout


def test_orbax_bench_runs_at_tiny_sizes():
    script = pathlib.Path(__file__).parents[1] / "bench" / "bench_orbax.py"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    done = subprocess.run([sys.executable, str(script), "--layers", "1", "--embed", "32", "--vocab", "64",
                           "--repeat", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for figure in ("StandardCheckpointer.restore", "reshard.orbax.restore", "reshard.orbax.export", "ratio"):
        assert figure in done.stdout, done.stdout
