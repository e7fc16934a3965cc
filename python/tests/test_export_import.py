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


def test_export_of_a_tensor_source_reads_each_box_through_its_function(tmp_path, rng):
    from reshard.pipelines import _TensorSource

    values = framework_model(rng)
    names = list(values)
    specs = [(n, "f32", v.shape) for n, v in values.items()]
    boxes, kept = [], []

    def read(source, starts, stops, buffer):
        box = tuple(slice(a, b) for a, b in zip(starts, stops))
        boxes.append((names[source], box))
        kept.append(buffer)
        np.frombuffer(buffer, np.float32).reshape([b - a for a, b in zip(starts, stops)])[...] = \
            values[names[source]][box]

    reshard.export(_TensorSource(specs, read), tmp_path / "hf", MAP)
    assert_hf_folder(tmp_path / "hf", values)
    assert {n for n, _ in boxes} == set(names)
    with pytest.raises(ValueError, match="released"):  # the export's bytes are out of reach after each call
        kept[0][0]

    def failing(source, starts, stops, buffer):
        if names[source] == "embed":
            raise KeyError("no such leaf here")
        read(source, starts, stops, buffer)

    with pytest.raises(KeyError, match="no such leaf here") as raised:  # raised again as it was raised
        reshard.export(_TensorSource(specs, failing), tmp_path / "failed", MAP)
    assert any("'embed'" in note and "model.embed.weight" in note for note in raised.value.__notes__)
    assert not (tmp_path / "failed").exists()
