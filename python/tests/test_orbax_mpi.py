"""reshard.orbax.export of a Levanter-layout LoRA model that Orbax saved: the Hugging Face
folders (model, merged) and the PEFT adapter are byte for byte what reshard.jax.export
writes from the same jax.Arrays; and under ``mpirun -np 1/2/4`` (orbax_mpi_job.py, no JAX in
the ranks) the processes restore every Orbax form onto layouts over the job, each reading
only the chunks its boxes touch, export the model together and convert it by the command line."""

from __future__ import annotations

import json
import os
import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import orbax_cases
import reshard.jax as rjax
import reshard.orbax as ro
from conftest import SEED
from mpi_launch import needs_mpirun, ranks_that_said, run

KINDS = ("model", "merged", "adapter")


def levanter_lora_tree(seed):
    """jax_export_load's Levanter Llama on 8 devices in a random order, with LoRA factors on q_proj."""
    jax.devices()  # XLA's device count is fixed now; the import below sets XLA_FLAGS for its own runs
    flags = os.environ.get("XLA_FLAGS")
    import jax_export_load as levanter

    os.environ["XLA_FLAGS"] = flags
    gen = np.random.default_rng(seed)
    mesh = levanter.mesh([int(d) for d in gen.permutation(8)])
    shardings = jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), levanter.specs_a(), is_leaf=levanter.is_spec)
    tree = jax.device_put(levanter.model_values(gen), shardings)
    lora_a = gen.standard_normal((levanter.LAYERS, levanter.R, levanter.EMBED)).astype(np.float32)
    lora_b = gen.standard_normal((levanter.LAYERS, levanter.KV, levanter.QPG, levanter.HEAD_DIM, levanter.R))
    tree["transformer"]["layers"]["stacked"]["self_attn"]["q_proj"]["lora"] = {
        "lora_A": {"weight": jax.device_put(lora_a, NamedSharding(mesh, P(None, None, "model")))},
        "lora_B": {"weight": jax.device_put(lora_b.astype(np.float32), NamedSharding(mesh, P(None, "data")))}}
    config = json.dumps({"peft_type": "LORA", "r": levanter.R, "lora_alpha": 2 * levanter.R})
    return tree, config


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The Orbax checkpoints of every form, a LoRA model saved by Orbax and its exports by reshard.jax."""
    folder = tmp_path_factory.mktemp("orbax-mpi")
    _, paths = orbax_cases.write_all(folder, SEED)
    tree, config = levanter_lora_tree(SEED)
    with ocp.StandardCheckpointer() as c:
        c.save(folder / "lora", tree)
    exports = {}
    for kind in KINDS:
        exports[kind] = str(folder / "jax" / kind)
        rjax.export(tree, exports[kind], "levanter-llama", kind=kind, lora_config=config)
    cases = {"forms": {f: str(p) for f, p in paths.items()}, "lora": str(folder / "lora"), "lora_config": config,
             "exports": exports}
    (folder / "cases.json").write_text(json.dumps(cases))
    return folder, cases


def same_files(a: pathlib.Path, b: pathlib.Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_export_of_an_orbax_lora_model_is_reshard_jax_exports(job):
    folder, cases = job
    for kind in KINDS:
        result = ro.export(cases["lora"], folder / "orbax" / kind, "levanter-llama", kind=kind,
                           lora_config=cases["lora_config"])
        assert result.tensors == (4 if kind == "adapter" else 21)
        same_files(folder / "orbax" / kind, pathlib.Path(cases["exports"][kind]))


@needs_mpirun
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_processes_restore_and_export_orbax_checkpoints_together(job, ranks):
    folder, _ = job
    done = run(pathlib.Path(__file__).with_name("orbax_mpi_job.py"), str(folder), str(SEED), ranks=ranks)
    assert done.returncode == 0, f"RESHARD_SEED={SEED}\n{done.stdout}\n{done.stderr}"
    assert ranks_that_said(done.stdout, "ok") == list(range(ranks)), done.stdout
