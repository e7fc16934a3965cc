"""One entry point: ``reshard export | inspect | convert`` of a Levanter checkpoint hands the job to
``python -m reshard.orbax`` installed beside it, with the same flags (sizes such as 5KB, --subtree,
--hf-config, --lora-config, --adapter-only, --merge-lora --base), under mpirun at 1, 2 and 4
processes, each writing its share: every export equal to the one-process Python API's, byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import levanter_cases as lc
import reshard
import reshard.orbax as ro
from conftest import SEED
from mpi_launch import needs_mpirun
from test_bench_storage import needs_binary, reshard_binary


def files(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A LoRA run's and a full run's step folders (nested under train_state), configs, and the base the
    full one exports to, all made by the Python API in one process."""
    root = tmp_path_factory.mktemp("levanter-cli")
    gen = np.random.default_rng(SEED)
    lc.save(str(root / "full" / "step-1000"), lc.state_values("nested", gen), "ocdbt")
    lc.save(str(root / "lora" / "step-1000"), lc.state_values("lora", gen), "zarr")
    (root / "config.json").write_text(json.dumps(lc.HF_CONFIG))
    (root / "adapter_config.json").write_text(json.dumps(lc.LORA_CONFIG))
    ro.export(root / "full" / "step-1000", root / "want" / "base", "levanter-llama", subtree="train_state.model",
              hf_config=lc.HF_CONFIG, max_shard_size="5KB")
    ro.export(root / "lora" / "step-1000", root / "want" / "adapter", "levanter-llama", kind="adapter",
              lora_config=lc.LORA_CONFIG)
    ro.export(root / "lora" / "step-1000", root / "want" / "merged", "levanter-llama", kind="merged",
              base=root / "want" / "base", lora_config=lc.LORA_CONFIG, max_shard_size="5KB")
    return root


def reshard_cmd(args: list[str], ranks: int = 0, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               RESHARD_PYTHON=os.environ.get("RESHARD_PYTHON", sys.executable))
    command = [reshard_binary(), *args]
    if ranks:
        command = ["mpirun", "-np", str(ranks), "--oversubscribe", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


@needs_binary
def test_inspect_and_convert_are_handed_over(run_dir, tmp_path):
    done = reshard_cmd(["inspect", str(run_dir / "full" / "step-1000"), "--json"])
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["kind"], found["step"]) == ("levanter", 1000)
    assert "train_state.model.transformer.norm.weight" in found["tensors"]
    done = reshard_cmd(["convert", str(run_dir / "lora" / "step-1000"), str(tmp_path / "ckpt"), "--timeout", "60"])
    assert done.returncode == 0, done.stderr
    assert reshard.inspect(tmp_path / "ckpt")["format"] == "checkpoint"
    done = reshard_cmd(["export", str(run_dir / "full" / "step-1000"), str(tmp_path / "x"), "--map", "levanter-llama"])
    assert done.returncode == 1 and "subtree" in done.stderr and "train_state.model" in done.stderr, done.stderr


def test_python_m_reshard_orbax_takes_sizes_as_the_other_entry_points(run_dir, tmp_path, capsys):
    from reshard import _orbax_cli

    assert _orbax_cli.main(["export", str(run_dir / "lora" / "step-1000"), str(tmp_path / "a"), "--map",
                            "levanter-llama", "--adapter-only", "--lora-config",
                            str(run_dir / "adapter_config.json")]) == 0
    assert _orbax_cli.main(["export", str(run_dir / "full" / "step-1000"), str(tmp_path / "m"), "--map",
                            "levanter-llama", "--subtree", "train_state.model", "--max-shard-size", "1.5KiB",
                            "--hf-config", str(run_dir / "config.json")]) == 0
    index = json.loads((tmp_path / "m" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 5  # files of at most 1.5 KiB (a larger tensor alone)
    with pytest.raises(SystemExit):
        _orbax_cli.main(["export", "x", "y", "--map", "m", "--max-shard-size", "5XB"])
    assert "--max-shard-size" in capsys.readouterr().err
    assert _orbax_cli.main(["inspect", str(tmp_path)]) == 1  # none of the kinds: an error line, not a traceback
    assert "_METADATA" in capsys.readouterr().err


@needs_mpirun
@needs_binary
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_mpirun_export_is_handed_over(run_dir, tmp_path, ranks):
    common = ["--map", "levanter-llama", "--timeout", "120"]
    jobs = {
        "base": ["export", str(run_dir / "full" / "step-1000"), str(tmp_path / "base"), *common,
                 "--subtree", "train_state.model", "--hf-config", str(run_dir / "config.json"),
                 "--max-shard-size", "5KB"],
        "adapter": ["export", str(run_dir / "lora" / "step-1000"), str(tmp_path / "adapter"), *common,
                    "--adapter-only", "--lora-config", str(run_dir / "adapter_config.json")],
        "merged": ["export", str(run_dir / "lora" / "step-1000"), str(tmp_path / "merged"), *common,
                   "--merge-lora", "--base", str(run_dir / "want" / "base"), "--lora-config",
                   str(run_dir / "adapter_config.json"), "--max-shard-size", "5KB"],
    }
    for what, args in jobs.items():
        done = reshard_cmd(args, ranks=ranks)
        assert done.returncode == 0, f"{what}: RESHARD_SEED={SEED}\n{done.stdout}\n{done.stderr[-4000:]}"
        assert files(tmp_path / what) == files(run_dir / "want" / what), what
