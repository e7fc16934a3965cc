"""reshard.orbax reading Levanter checkpoints written as Levanter writes them (levanter_cases:
JAX's own serializer, both layouts), and the plain JAX GlobalAsyncCheckpointManager folders they
are made of: restored onto other shardings as JAX's own deserialize restores them, exported to
Hugging Face and PEFT folders equal to numpy's rearrangement of the saved arrays, and each kind
of bad input refused by name."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest
from jax.experimental.array_serialization import serialization as jser
from jax.sharding import Mesh as JaxMesh, NamedSharding as JaxSharding, PartitionSpec as JaxP

import levanter_cases as lc
import reshard
import reshard.hf
import reshard.orbax as ro
from conftest import SEED
from reshard import P, errors


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{(layout, state): (folder, values)} for every layout and state of levanter_cases."""
    root = tmp_path_factory.mktemp("levanter")
    gen = np.random.default_rng(SEED)
    found = {}
    for state in lc.STATES:
        values = lc.state_values(state, gen)
        for layout in lc.LAYOUTS:
            folder = root / f"{layout}-{state}" / "step-1000"
            lc.save(str(folder), values, layout)
            found[layout, state] = folder, values
    return found


def model_of(values: dict, prefix: str = "model.") -> dict[str, np.ndarray]:
    return {n[len(prefix):]: v for n, v in values.items() if n.startswith(prefix)}


def test_written_as_levanter_writes(saved):
    ocdbt, _ = saved["ocdbt", "full"]
    assert (ocdbt / "manifest.ocdbt").is_file() and not list(ocdbt.rglob("zarr.json"))
    assert json.loads((ocdbt / "metadata.json").read_text())["step"] == 1000
    zarr, _ = saved["zarr", "lora"]
    assert (zarr / "model/transformer/layers/stacked/self_attn/q_proj/lora/lora_A/weight/.zarray").is_file()
    assert not (zarr / "model/transformer/layers/stacked/self_attn/q_proj/weight").exists()


@pytest.mark.parametrize("layout", lc.LAYOUTS)
def test_inspect_finds_the_kind_and_every_leaf(saved, layout):
    folder, values = saved[layout, "full"]
    found = ro.inspect(folder)
    assert (found.kind, found.step, found.use_ocdbt) == ("levanter", 1000, layout == "ocdbt")
    assert found.driver == ("zarr3" if layout == "ocdbt" else "zarr")
    assert list(found.tensors) == sorted(values)
    for name, t in found.tensors.items():
        assert t.shape == values[name].shape and np.dtype(t.dtype) == values[name].dtype, name
    assert f"Levanter checkpoint, step 1000, {len(values)} leaves" in str(found)
    assert list(ro.inspect(folder, subtree="model").tensors) == sorted(model_of(values))


def jax_targets(rng, shapes: dict[str, tuple[int, ...]]) -> dict[str, JaxSharding]:
    """A random sharding of each shape on a random order of 8 devices: (4, 2) or (8,), any dimension an
    axis divides split over it."""
    devices = rng.sample(jax.devices()[8:24], 8)
    meshes = [JaxMesh(np.array(devices, dtype=object).reshape(4, 2), ("a", "b")),
              JaxMesh(np.array(devices, dtype=object), ("x",))]
    out = {}
    for name, shape in shapes.items():
        mesh = rng.choice(meshes)
        free = list(mesh.shape.items())
        spec = []
        for n in shape:
            fits = [a for a in free if n % a[1] == 0]
            if fits and rng.random() < 0.6:
                free.remove(fits[0])
                spec.append(fits[0][0])
            else:
                spec.append(None)
        out[name] = JaxSharding(mesh, JaxP(*spec))
    return out


@pytest.mark.parametrize("layout", lc.LAYOUTS)
def test_restore_equals_jax_deserialize(saved, rng, layout):
    folder, values = saved[layout, "full"]
    model = model_of(values)
    targets = jax_targets(rng, {n: v.shape for n, v in model.items()})
    print({n: str(t.spec) for n, t in targets.items()})
    got = ro.restore(folder, targets)
    specs = [lc._spec(str(folder), f"model.{n}", layout) for n in targets]
    want = jser.GlobalAsyncCheckpointManager().deserialize(list(targets.values()), specs)
    for (name, target), theirs in zip(targets.items(), want):
        ours = got[name]
        assert ours.sharding == target == theirs.sharding, name
        assert np.asarray(ours).tobytes() == np.asarray(theirs).tobytes() == model[name].tobytes(), name
        for a, b in zip(ours.addressable_shards, theirs.addressable_shards):
            assert a.device == b.device and np.asarray(a.data).tobytes() == np.asarray(b.data).tobytes(), name
    # The whole state too, and the training key by its own tree path.
    whole = ro.restore(folder, reshard.Mesh(np.arange(4), ("x",)), best_effort="x", subtree="")
    assert sorted(whole) == sorted(values)
    assert reshard.to_host(whole["training_key"]).tobytes() == values["training_key"].tobytes()


def test_each_process_reads_only_its_boxes(saved):
    """Each of 2 processes reads the chunk files its half overlaps and the array's metadata, no more
    (TensorStore's own counters of the bytes its file driver read)."""
    folder, values = saved["zarr", "full"]
    name = "transformer.layers.stacked.mlp.down_proj.weight"
    array = folder / "model" / name.replace(".", "/")
    chunks = json.loads((array / ".zarray").read_text())["chunks"]
    shape = values[f"model.{name}"].shape
    half = reshard.NamedSharding(reshard.Mesh([0, 1], ("d",)), P(None, None, "d"))
    for rank in range(2):
        _, stats = ro.restore_with_result(folder, {name: half}, topology=reshard.Topology.uniform(2, 2),
                                          transport=_Rank(rank))
        lo, hi = rank * shape[2] // 2, (rank + 1) * shape[2] // 2
        overlapping = sum(f.stat().st_size for f in array.iterdir() if not f.name.startswith(".")
                          and lo < (int(f.name.split(".")[2]) + 1) * chunks[2]
                          and int(f.name.split(".")[2]) * chunks[2] < hi)
        metadata = sum(f.stat().st_size for f in array.iterdir() if f.name.startswith("."))
        assert stats.bytes_needed == values[f"model.{name}"].nbytes // 2
        assert overlapping <= stats.bytes_read <= overlapping + metadata, (rank, stats, overlapping, metadata)


def test_the_default_split_keeps_to_whole_chunks():
    from reshard import _orbax_targets as targets

    def aligned(shape, chunks, processes):
        mesh = reshard.Mesh(list(range(processes)), ("process",))
        best_effort = targets.layout(mesh, reshard.Topology.uniform(processes, processes), None, "process")
        return targets.chunk_aligned("w", shape, chunks, mesh, best_effort).spec

    for processes, spec in ((2, P(None, None, "process")), (4, P(None, "process")), (5, P())):
        assert aligned((2, 24, 16), (2, 6, 8), processes) == spec, processes
    # No split whole chunks allow: the last dimension the count divides, as best effort.
    assert aligned((2, 24, 16), (2, 24, 16), 2) == P(None, None, "process")


class _Rank:
    """What reshard.orbax asks of a transport: which process this is, of how many."""

    def __init__(self, rank: int) -> None:
        self.rank, self.size = rank, 2


@pytest.mark.parametrize("layout", lc.LAYOUTS)
def test_export_model_adapter_and_merged(saved, tmp_path, layout):
    folder, values = saved[layout, "full"]
    ro.export(folder, tmp_path / "base", "levanter-llama", hf_config=lc.HF_CONFIG)
    hf = reshard.hf.load_folder(tmp_path / "base")
    want = lc.hf_reference(model_of(values))
    assert sorted(hf) == sorted(want)
    assert all(hf[n].tobytes() == want[n].tobytes() for n in want)

    lora_folder, lora = saved[layout, "lora"]
    ro.export(lora_folder, tmp_path / "adapter", "levanter-llama", kind="adapter", lora_config=lc.LORA_CONFIG)
    adapter = reshard.hf.load_folder(tmp_path / "adapter")
    want = lc.adapter_reference(model_of(lora))
    assert sorted(adapter) == sorted(want)
    assert all(adapter[n].tobytes() == want[n].tobytes() for n in want)
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == lc.R and sorted(config["target_modules"]) == ["q_proj", "v_proj"]

    # Merged into a base read from a Hugging Face folder: as merge-lora merges the exported adapter.
    result = ro.export(lora_folder, tmp_path / "merged", "levanter-llama", kind="merged", base=tmp_path / "base",
                       lora_config=lc.LORA_CONFIG)
    assert result.merged == 2 * lc.L
    reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "by-merge-lora")
    merged, by_merge_lora = (reshard.hf.load_folder(tmp_path / f) for f in ("merged", "by-merge-lora"))
    assert sorted(merged) == sorted(hf)
    assert all(merged[n].tobytes() == by_merge_lora[n].tobytes() for n in merged)
    q = "model.layers.1.self_attn.q_proj.weight"
    delta = model_of(lora)[f"{lc._STACK}.self_attn.q_proj.lora.lora_B.weight"][1].reshape(-1, lc.R) @ \
        model_of(lora)[f"{lc._STACK}.self_attn.q_proj.lora.lora_A.weight"][1]
    np.testing.assert_allclose(merged[q], hf[q] + 2.0 * delta, rtol=1e-5, atol=1e-6)
    assert json.loads((tmp_path / "merged" / "config.json").read_text()) == lc.HF_CONFIG  # the base's
    assert result.wrote_config_json
    # A checkpoint with weights of its own merges into them: a base beside them is refused, not one chosen.
    with pytest.raises(errors.InvalidArgumentError, match="holds base weights itself"):
        ro.export(folder, tmp_path / "refused", "levanter-llama", kind="merged", base=tmp_path / "base",
                  lora_config=lc.LORA_CONFIG)
    assert not (tmp_path / "refused").exists()


def test_export_takes_sizes_as_every_entry_point_does(saved, tmp_path):
    folder, values = saved["zarr", "full"]
    result = ro.export(folder, tmp_path / "hf", "levanter-llama", hf_config=lc.HF_CONFIG, max_shard_size="4KB")
    files = sorted((tmp_path / "hf").glob("*.safetensors"))
    assert result.files == len(files) > 1 and (tmp_path / "hf" / "model.safetensors.index.json").exists()
    got, want = reshard.hf.load_folder(tmp_path / "hf"), lc.hf_reference(model_of(values))
    assert sorted(got) == sorted(want) and all(got[n].tobytes() == want[n].tobytes() for n in want)
    # Checked before anything is read: the source need not exist for the size to be refused.
    with pytest.raises(errors.ParseError, match="max_shard_size"):
        ro.export(tmp_path / "nowhere", tmp_path / "out", "levanter-llama", max_shard_size="4 kilos")
    with pytest.raises(errors.ArgumentTypeError, match="part_size"):
        ro.export(tmp_path / "nowhere", tmp_path / "out", "levanter-llama", part_size=1.5)


def test_a_state_nested_deeper_is_read_by_its_subtree(saved, tmp_path):
    folder, values = saved["ocdbt", "nested"]
    with pytest.raises(errors.MissingTensorError, match=r"subtree: .*'model'.*train_state.model"):
        ro.export(folder, tmp_path / "hf", "levanter-llama")
    ro.export(folder, tmp_path / "hf", "levanter-llama", subtree="train_state.model", hf_config=lc.HF_CONFIG)
    want = lc.hf_reference(model_of(values, "train_state.model."))
    got = reshard.hf.load_folder(tmp_path / "hf")
    assert all(got[n].tobytes() == want[n].tobytes() for n in want)
    ro.convert(folder, tmp_path / "ckpt", subtree="train_state.model")
    one = reshard.NamedSharding(reshard.Mesh([0], ("d",)), P())
    back = reshard.restore_checkpoint(tmp_path / "ckpt", {n: one for n in model_of(values, "train_state.model.")})
    assert {n: reshard.to_host(a).tobytes() for n, a in back.items()} == \
        {n: v.tobytes() for n, v in model_of(values, "train_state.model.").items()}


def test_plain_jax_folders(tmp_path):
    """What JAX's GlobalAsyncCheckpointManager writes by itself: serialize_with_paths's zarr folders, and
    zarr3 in an OCDBT database at each array's parent folder (get_tensorstore_spec(ocdbt=True))."""
    gen = np.random.default_rng(SEED)
    values = {"a": gen.standard_normal((8, 4)).astype(np.float32), "b": np.arange(6, dtype=np.int32)}
    arrays = [jax.device_put(v) for v in values.values()]
    manager = jser.GlobalAsyncCheckpointManager()
    manager.serialize_with_paths(arrays, [str(tmp_path / "paths" / n) for n in values])
    specs = [jser.get_tensorstore_spec(str(tmp_path / "ocdbt" / "params" / n), ocdbt=True) for n in values]
    manager.serialize(arrays, specs)
    manager.wait_until_finished()
    one = reshard.NamedSharding(reshard.Mesh([0, 1], ("x",)), P())
    for form, driver, ocdbt, prefix in (("paths", "zarr", False, ""), ("ocdbt", specs[0]["driver"], True, "params.")):
        found = ro.inspect(tmp_path / form)
        assert (found.kind, found.driver, found.use_ocdbt) == ("jax", driver, ocdbt), form
        assert sorted(found.tensors) == [prefix + n for n in values], form
        back = ro.restore(tmp_path / form, one)
        assert all(reshard.to_host(back[prefix + n]).tobytes() == v.tobytes() for n, v in values.items()), form


def test_errors_name_the_leaf_the_file_or_the_kinds(saved, tmp_path):
    folder, values = saved["zarr", "full"]
    one = reshard.NamedSharding(reshard.Mesh([0], ("d",)), P())
    with pytest.raises(errors.MissingTensorError, match="transformer.nothing"):
        ro.restore(folder, {"transformer.nothing": one})

    # A chunk cut short, in an array folder and in the OCDBT database's data file.
    damaged = tmp_path / "damaged"
    shutil.copytree(folder, damaged)
    chunk = damaged / "model/transformer/norm/weight/0"
    chunk.write_bytes(chunk.read_bytes()[:5])
    with pytest.raises(errors.FormatError, match="'transformer.norm.weight'"):
        ro.restore(damaged, {"transformer.norm.weight": one})
    with pytest.raises(errors.FormatError, match="'transformer.norm.weight'"):  # read block by block
        ro.export(damaged, tmp_path / "hf", "levanter-llama")
    assert not (tmp_path / "hf").exists()
    shutil.rmtree(damaged)
    shutil.copytree(saved["ocdbt", "full"][0], damaged)
    for data in (damaged / "d").iterdir():
        data.write_bytes(data.read_bytes()[:len(data.read_bytes()) // 2])
    with pytest.raises(errors.FormatError, match=r"(tensor '|OCDBT database).*(d/|Byte range)"):
        ro.restore(damaged, one)

    # Levanter's arrays without its metadata.json: a save that did not finish.
    unfinished = tmp_path / "unfinished"
    shutil.copytree(folder, unfinished)
    (unfinished / "metadata.json").unlink()
    with pytest.raises(errors.IncompleteCheckpointError, match="metadata.json"):
        ro.inspect(unfinished)

    # Folders of other kinds: named, with what each kind needs.
    reshard.save_checkpoint({"w": reshard.from_host(np.zeros(4, np.float32), one)}, tmp_path / "ours")
    with pytest.raises(errors.NotOrbaxCheckpointError, match="manifest.json.*reshard checkpoint.*Levanter"):
        ro.inspect(tmp_path / "ours")
    with pytest.raises(errors.NotOrbaxCheckpointError, match=r"Levanter run's folder of steps \['step-1000'\]"):
        ro.inspect(folder.parent)
