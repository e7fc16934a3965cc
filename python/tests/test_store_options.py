"""reshard.storage.options / set_options: the store clients' timeout and concurrency, as
`--timeout` sets them on the command line. An endpoint where nothing listens is retried until
the timeout set here, then a StoreUnreachableError; bad values are refused by argument name and
change nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import reshard.storage
from reshard import errors

# A read from an S3 endpoint where nothing listens (the discard port), timed, in a process of
# its own so that its environment and options touch no other test.
READ_FROM_NOWHERE = """
import json, sys, time
import reshard.safetensors, reshard.storage
from reshard import errors
reshard.storage.set_options(timeout=float(sys.argv[1]))
start = time.monotonic()
try:
    reshard.safetensors.safe_open("s3://bucket/model.safetensors")
    raised = None
except errors.ReshardError as e:
    raised = {"type": type(e).__name__, "message": str(e)}
print(json.dumps({"seconds": time.monotonic() - start, "raised": raised}))
"""


def read_from_nowhere(timeout: float) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STORAGE_EMULATOR"))}
    env.update({"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test-secret",
                "AWS_EC2_METADATA_DISABLED": "true"})
    done = subprocess.run([sys.executable, "-c", READ_FROM_NOWHERE, str(timeout)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_timeout_set_is_the_one_requests_keep():
    short, longer = read_from_nowhere(1), read_from_nowhere(4)
    for seen in (short, longer):
        assert seen["raised"]["type"] == "StoreUnreachableError", seen
        assert "127.0.0.1:9" in seen["raised"]["message"], seen
    assert short["seconds"] < 30, short
    assert longer["seconds"] >= 3.5, longer  # retried until its own timeout, not the first's


def test_options_read_back_and_bad_values_change_nothing():
    before = reshard.storage.options()
    assert before == reshard.storage.StoreOptions(timeout=120.0, concurrency=8)
    try:
        assert reshard.storage.set_options(timeout=2.5) == (2.5, 8)
        assert reshard.storage.set_options(concurrency=3) == (2.5, 3)
        for bad in ({"timeout": 0}, {"timeout": float("nan")}, {"timeout": -1}, {"concurrency": 0},
                    {"concurrency": 5000}):
            with pytest.raises(errors.InvalidArgumentError, match=f"^{next(iter(bad))}: "):
                reshard.storage.set_options(**bad)
        for bad in ({"timeout": "3"}, {"timeout": True}, {"concurrency": 2.0}):
            with pytest.raises(errors.ArgumentTypeError, match=f"^{next(iter(bad))}: "):
                reshard.storage.set_options(**bad)
        with pytest.raises(TypeError):
            reshard.storage.set_options(3)  # keyword-only
        assert reshard.storage.options() == (2.5, 3)
    finally:
        reshard.storage.set_options(timeout=before.timeout, concurrency=before.concurrency)
