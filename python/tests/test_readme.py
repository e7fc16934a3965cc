"""The Python blocks of README.md and docs/*.md run as written (as tests/package runs their C++
programs): each in a fresh interpreter with 8 forced CPU devices for JAX, in a folder holding
the files the block
names (its first comment line says which), and a block headed ``# mpirun -np N python ...``
under ``mpirun -np N``. A block that starts a multi-process JAX job (jax.distributed) is not
run here: test_jax_job.py runs those calls in real 2- and 4-process JAX jobs; nor is one
headed ``# Not run by python/tests/test_readme.py: WHY`` (files only the user has)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import safetensors.numpy

import reshard
from capability import skip_without
from mpi_launch import mpi_missing
from reshard import P

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LAYERS, EMBED, KV, HEAD_DIM, MLP, VOCAB = 2, 8, 4, 2, 16, 16  # one query head per KV head
CONFIG = {"model_type": "llama", "hidden_size": EMBED, "num_attention_heads": KV, "num_key_value_heads": KV,
          "head_dim": HEAD_DIM, "intermediate_size": MLP, "vocab_size": VOCAB, "num_hidden_layers": LAYERS}


def python_blocks() -> list[tuple[str, str]]:
    """(page, block) for every Python block, README.md first, then docs/ in name order."""
    return [(page.relative_to(ROOT).as_posix(), block) for page in PAGES
            for block in re.findall(r"^```python\n(.*?)^```$", page.read_text(), flags=re.S | re.M)]


def levanter_llama(gen) -> dict[str, np.ndarray]:
    s = "transformer.layers.stacked."
    shapes = {"embeddings.token_embeddings.weight": (VOCAB, EMBED), "lm_head.weight": (VOCAB, EMBED),
              "transformer.norm.weight": (EMBED,),
              s + "self_attn.q_proj.weight": (LAYERS, KV, 1, HEAD_DIM, EMBED),
              s + "self_attn.k_proj.weight": (LAYERS, KV, HEAD_DIM, EMBED),
              s + "self_attn.v_proj.weight": (LAYERS, KV, HEAD_DIM, EMBED),
              s + "self_attn.o_proj.weight": (LAYERS, EMBED, KV, HEAD_DIM),
              s + "mlp.gate_proj.weight": (LAYERS, MLP, EMBED), s + "mlp.up_proj.weight": (LAYERS, MLP, EMBED),
              s + "mlp.down_proj.weight": (LAYERS, EMBED, MLP),
              s + "input_layernorm.weight": (LAYERS, EMBED), s + "post_attention_layernorm.weight": (LAYERS, EMBED)}
    return {name: gen.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def prepare_folder(folder: pathlib.Path, gen) -> None:
    """The files the first block's opening comment names."""
    safetensors.numpy.save_file({"embed": gen.standard_normal((16, 8)).astype(np.float32)},
                                str(folder / "model.safetensors"))
    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(8).reshape(2, 4), ("data", "model")), P())
    arrays = {n: reshard.from_host(v, sharding) for n, v in levanter_llama(gen).items()}
    reshard.save_checkpoint(arrays, folder / "llama-ckpt", metadata={"reshard.hf_config": json.dumps(CONFIG)})


def run_block(block: str, folder: pathlib.Path, name: str):
    script = folder / f"{name}.py"
    script.write_text(block)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    launcher = re.match(r"# mpirun -np (\d+) python", block)
    command = [sys.executable, str(script)]
    if launcher:
        if mpi_missing():
            skip_without("MPI (reshard built with it, and mpirun)", "reshard built without MPI, or no mpirun")
        command = ["mpirun", "-np", launcher.group(1), "--oversubscribe", *command]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300, env=env)


def test_the_readme_and_docs_python_blocks_run_as_written(tmp_path, rng):
    import reshard.mpi  # noqa: F401  (for reshard.mpi.available)

    blocks = python_blocks()
    assert len(blocks) >= 4, "README.md and docs/ lost their Python blocks"
    assert any(page == "README.md" for page, _ in blocks), "README.md lost its Python quickstart"
    prepare_folder(tmp_path, np.random.default_rng(rng.randrange(2**32)))
    ran = 0
    for i, (page, block) in enumerate(blocks):
        if "jax.distributed.initialize()" in block or block.startswith("# Not run by python/tests/test_readme.py"):
            continue  # a multi-process JAX job (test_jax_job.py runs its calls), or a sketch over the user's files
        done = run_block(block, tmp_path, f"block{i}")
        assert done.returncode == 0, f"{page}'s Python block ({i}) failed:\n{block}\n{done.stdout}\n{done.stderr}"
        ran += 1
    assert ran >= 2
    # What the blocks said they wrote is there.
    assert reshard.verify(tmp_path / "ckpt")["tensors"] >= 1
    assert (tmp_path / "llama-hf" / "config.json").exists()
