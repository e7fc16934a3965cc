"""Export and import from Python: sharded arrays (or a checkpoint) through a tensor map to a
Hugging Face folder that the safetensors package reads, and back into the framework layout."""

from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors.numpy

import reshard
from reshard import P, errors

TOPOLOGY = reshard.Topology.uniform(4, 1)
MAP = json.dumps({"rules": [
    {"from": "stacked.w", "to": "model.layers.{layer}.w", "rearrange": "layer out in -> in out"},
    {"from": "embed", "to": "model.embed.weight"},
]})


def framework_model(rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    return {"stacked.w": gen.standard_normal((3, 4, 6)).astype(np.float32),
            "embed": gen.standard_normal((8, 4)).astype(np.float32)}


def layout():
    mesh = reshard.Mesh(np.array([2, 0, 3, 1]).reshape(2, 2), ("data", "model"))
    return {"stacked.w": reshard.NamedSharding(mesh, P(None, "data", "model")),
            "embed": reshard.NamedSharding(mesh, P(("data", "model")))}


def assert_hf_folder(folder, values):
    theirs = safetensors.numpy.load_file(str(folder / "model.safetensors"))
    assert sorted(theirs) == ["model.embed.weight"] + [f"model.layers.{i}.w" for i in range(3)]
    for i in range(3):
        np.testing.assert_array_equal(theirs[f"model.layers.{i}.w"], values["stacked.w"][i].T)
    np.testing.assert_array_equal(theirs["model.embed.weight"], values["embed"])


def test_export_arrays_and_checkpoints_then_import_back(tmp_path, rng):
    values = framework_model(rng)
    arrays = {n: reshard.from_host(v, layout()[n], TOPOLOGY) for n, v in values.items()}
    result = reshard.export(arrays, tmp_path / "hf", MAP)
    assert result.tensors == 4 and result.bytes == sum(v.nbytes for v in values.values())
    assert_hf_folder(tmp_path / "hf", values)
    reshard.save_checkpoint(arrays, tmp_path / "ckpt")
    reshard.export(tmp_path / "ckpt", tmp_path / "hf2", MAP, dtype=None)
    assert_hf_folder(tmp_path / "hf2", values)

    mesh = reshard.Mesh(np.arange(4), ("x",))
    back = reshard.import_model(tmp_path / "hf", MAP, mesh, rules=[("stacked.w", P(None, "x")), ("embed", P("x"))])
    assert sorted(back) == sorted(values)
    for name, array in back.items():
        np.testing.assert_array_equal(reshard.to_host(array), values[name])
    assert back["embed"].sharding == reshard.NamedSharding(mesh, P("x"))
    imported = reshard.import_checkpoint(tmp_path / "hf", tmp_path / "ckpt2", MAP, mesh, best_effort="x")
    assert imported.tensors == 2
    restored = reshard.restore_checkpoint(tmp_path / "ckpt2", layout(), TOPOLOGY)
    for name, array in restored.items():
        np.testing.assert_array_equal(reshard.to_host(array), values[name])


def test_map_errors_come_before_anything_is_written(tmp_path, rng):
    values = framework_model(rng)
    arrays = {n: reshard.from_host(v, layout()[n], TOPOLOGY) for n, v in values.items()}
    only_w = json.dumps({"rules": [json.loads(MAP)["rules"][0]]})
    with pytest.raises(errors.InvalidArgumentError, match="embed"):
        reshard.export(arrays, tmp_path / "hf", only_w)
    assert not (tmp_path / "hf").exists()
    with pytest.raises(errors.InvalidArgumentError, match="kind"):
        reshard.export(arrays, tmp_path / "hf", MAP, kind="everything")
