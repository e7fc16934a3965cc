"""python/bench/bench_levanter.py at a small size: both ways run as 4-process jobs against the local
S3 server, the report has their times and peak RSS per process, and both uploads hold the same
tensors."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from mpi_launch import needs_mpirun
from test_bench_storage import needs_binary, needs_s3_server, reshard_binary

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "python" / "bench" / "bench_levanter.py"


@needs_mpirun
@needs_binary
@needs_s3_server
def test_a_small_run_reports_both_ways(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--mib", "8", "--json", "--reshard", reshard_binary(),
                           "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["same_tensors"] and report["processes"] == 4 and report["model_bytes"] > 4 << 20
    for way in ("ours", "levanter"):
        assert report[way]["seconds"] > 0 and len(report[way]["peak_rss"]) == 4, report
