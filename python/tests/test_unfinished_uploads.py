"""What a killed writer left beside a path: reshard.inspect and reshard.verify point it out as
``reshard inspect --json`` and ``reshard verify`` do (the dict's "unfinished_uploads" and an
UnfinishedUploadsWarning in the command's words, or a note on the error of a call that fails),
and never remove it."""

from __future__ import annotations

import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import reshard
from reshard import errors


def ended_process_id() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)
    return int(done.stdout)


def killed_writers_staging(final: Path) -> Path:
    """A staging folder beside `final` as a writer of it that was killed leaves one."""
    staging = final.parent / f".{final.name}.tmp-reshard-{socket.gethostname()}-{ended_process_id()}.1-0badf00d"
    staging.mkdir()
    (staging / "model-00001-of-00002.safetensors").write_bytes(b"partial")
    return staging


def test_a_killed_writers_staging_is_pointed_out_not_removed(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    safetensors.numpy.save_file({"w": np.arange(6, dtype=np.float32)}, str(model / "model.safetensors"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left beside it: no warning, no key
        assert "unfinished_uploads" not in reshard.inspect(model)
        assert "unfinished_uploads" not in reshard.verify(model)

    staging = killed_writers_staging(model)
    with pytest.warns(errors.UnfinishedUploadsWarning, match="the next write of the same destination removes them") \
            as caught:
        seen = reshard.inspect(model)
    assert seen["unfinished_uploads"] == [str(staging)]
    assert staging.name in str(caught[0].message) and "1 unfinished upload beside it" in str(caught[0].message)
    assert caught[0].filename == __file__  # the caller's line, not reshard's
    assert [t["name"] for t in seen["tensors"]] == ["w"]
    with pytest.warns(errors.UnfinishedUploadsWarning, match=staging.name):
        assert reshard.verify(model)["unfinished_uploads"] == [str(staging)]

    # A read that fails carries the note on its error: the leftovers may be why.
    (model / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(errors.ReshardError) as failed:
        reshard.verify(model)
    assert any(staging.name in note for note in getattr(failed.value, "__notes__", [])), failed.value
    assert staging.exists(), "a reader removed it"
