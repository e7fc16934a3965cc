"""A writer killed (SIGKILL) while it fills a local folder leaves its hidden staging folder;
the next write of the same folder removes it, succeeds, and leaves no staging behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np

import reshard.safetensors

WRITE = """
import sys, reshard
reshard.convert(sys.argv[1], sys.argv[2], output="hf", max_shard_size="1MB")
"""


def stagings(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-reshard-" in p.name)


def test_the_next_writer_removes_a_killed_writers_staging(tmp_path):
    source = tmp_path / "model.safetensors"
    # Enough 1 MB shards that the writer is still at them when its staging is seen.
    reshard.safetensors.save_file({f"w{i}": np.full((512, 1024), i, np.float32) for i in range(256)}, source)
    out = tmp_path / "out"
    writer = subprocess.Popen([sys.executable, "-c", WRITE, str(source), str(out)])
    deadline = time.monotonic() + 60
    while not stagings(tmp_path) and writer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    left = stagings(tmp_path)
    assert writer.returncode == -signal.SIGKILL and left, "the writer ended before it could be killed mid-write"
    assert not out.exists()
    subprocess.run([sys.executable, "-c", WRITE, str(source), str(out)], check=True, timeout=120)
    assert stagings(tmp_path) == []
    assert len(reshard.hf.load_folder(out)) == 256
