"""examples/levanter_checkpoint_export.py as docs/checkpoints.md runs it, against the local S3 server (and
the GCS one, and a local folder): a 4-process JAX job saves a LoRA run's state to s3:// as Levanter does, `mpirun -np 4 reshard export`
writes the PEFT adapter and the merged model to s3://, and a 4-process job checks them against numpy
and loads the merged model onto another mesh with reshard.jax.load_pretrained."""

from __future__ import annotations

import pathlib
import sys

import pytest

from conftest import SEED
from mpi_launch import needs_mpirun, ranks_that_said, run
from test_bench_storage import needs_binary, needs_s3_server, reshard_binary
from test_levanter_cli import reshard_cmd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "storage" / "servers"))
import store_servers  # noqa: E402

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "levanter_checkpoint_export.py"
BUCKET = "reshard-levanter"


@needs_mpirun
@needs_binary
@needs_s3_server
# 4 processes writing one OCDBT database need the store's conditional writes: fake-gcs-server's lose
# chunks now and then, so the GCS run saves Levanter's previous layout (a zarr folder per leaf).
@pytest.mark.parametrize("where,layout", [("s3", "ocdbt"), ("local", "ocdbt"), ("gs", "zarr")])
def test_the_readme_flow(where, layout, tmp_path, monkeypatch):
    with store_servers.running_servers(s3_buckets=[BUCKET], gcs_buckets=[BUCKET]) as state:
        s3 = state["s3"]
        env = {"AWS_ACCESS_KEY_ID": s3["access_key"], "AWS_SECRET_ACCESS_KEY": s3["secret_key"],
               "AWS_REGION": s3["region"], "AWS_ENDPOINT_URL": s3["endpoint"], "AWS_EC2_METADATA_DISABLED": "true",
               "STORAGE_EMULATOR_HOST": state["gcs"]["endpoint"], "RESHARD_SEED": str(SEED)}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "TENSORSTORE_GCS_HTTP_URL",
                     "GOOGLE_APPLICATION_CREDENTIALS"):
            monkeypatch.delenv(name, raising=False)
        root = str(tmp_path / "out") if where == "local" else f"{where}://{BUCKET}"
        step = f"{root}/run/step-1000"
        done = run(EXAMPLE, "save", step, "--local", str(tmp_path), "--layout", layout, ranks=4, env=env)
        assert ranks_that_said(done.stdout, "ok") == [0, 1, 2, 3], f"{done.stdout}\n{done.stderr[-4000:]}"
        config = str(tmp_path / "adapter_config.json")
        for args in (["--adapter-only"], ["--merge-lora", "--base", str(tmp_path / "base")]):
            out = f"{root}/{'adapter' if args[0] == '--adapter-only' else 'merged'}"
            done = reshard_cmd(["export", step, out, "--map", "levanter-llama", "--lora-config", config, *args],
                               ranks=4)
            assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr[-4000:]}"
        done = run(EXAMPLE, "check", root, "--local", str(tmp_path), ranks=4, env=env)
        assert ranks_that_said(done.stdout, "ok") == [0, 1, 2, 3], f"{done.stdout}\n{done.stderr[-4000:]}"
