"""Checkpoints, convert and merge-lora from Python: round trips onto other layouts byte for
byte, asynchronous saves, damage detected by checksum, and outputs that the safetensors
package reads back."""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

import reshard
from reshard import P, errors

TOPOLOGY = reshard.Topology.uniform(8, 1)


def sharding(devices, axes, spec):
    return reshard.NamedSharding(reshard.Mesh(np.asarray(devices), axes), spec)


def model(rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    return {
        "embed": gen.standard_normal((16, 24)).astype(np.float32),
        "layers.0.w": gen.standard_normal((8, 6)).astype(ml_dtypes.bfloat16),
        "layers.0.b": gen.integers(-100, 100, 8).astype(np.int64),
        "step": np.array(7, np.int32),
    }


SAVED = {
    "embed": sharding(np.arange(8).reshape(2, 4), ("data", "model"), P("data", "model")),
    "layers.0.w": sharding(np.arange(8).reshape(4, 2), ("data", "model"), P(None, "model")),
    "layers.0.b": sharding(np.arange(8), ("x",), P("x")),
    "step": sharding(np.arange(8), ("x",), P()),
}
# Another device order, another mesh shape, fewer devices.
RESTORED = {
    "embed": sharding([0, 4, 1, 5, 2, 6, 3, 7], ("model",), P(None, "model")),
    "layers.0.w": sharding(np.array([7, 6, 5, 4]).reshape(2, 2), ("a", "b"), P(("b", "a"))),
    "layers.0.b": sharding([3, 1], ("x",), P("x")),
    "step": sharding([5], ("x",), P()),
}


def saved_arrays(values):
    return {n: reshard.from_host(v, SAVED[n], TOPOLOGY) for n, v in values.items()}


def assert_holds(arrays, values):
    assert list(arrays) == list(values)
    for name, array in arrays.items():
        assert array.dtype == values[name].dtype and array.shape == values[name].shape
        for shard in array.shards:
            assert shard.data.tobytes() == values[name][shard.index].tobytes(), (name, shard.device)
        assert reshard.to_host(array).tobytes() == values[name].tobytes()


def test_save_then_restore_onto_other_layouts(tmp_path, rng):
    values = model(rng)
    stats = reshard.save_checkpoint(saved_arrays(values), tmp_path / "ckpt", metadata={"step": "7"})
    assert stats.bytes_written == sum(v.nbytes for v in values.values())  # each chunk once, replicas too
    restored = reshard.checkpoint.restore(tmp_path / "ckpt", RESTORED, TOPOLOGY)
    assert isinstance(restored, dict) and list(restored) == list(RESTORED)
    assert_holds(restored, values)
    assert restored.stats.data_bytes_read >= stats.bytes_written
    for name, array in restored.items():
        assert array.sharding == RESTORED[name]
    # A subset, in another order.
    subset = reshard.restore_checkpoint(tmp_path / "ckpt", {"step": RESTORED["step"], "embed": SAVED["embed"]})
    assert_holds(subset, {"step": values["step"], "embed": values["embed"]})
    with pytest.raises(errors.MissingTensorError, match="nope"):
        reshard.restore_checkpoint(tmp_path / "ckpt", {"nope": RESTORED["step"]})
    with pytest.raises(errors.InvalidArgumentError):
        reshard.save_checkpoint(saved_arrays(values), tmp_path / "ckpt", replace=False)


def test_restore_into_allocated_arrays_and_never_into_read_only_ones(tmp_path, rng):
    values = model(rng)
    reshard.save_checkpoint(saved_arrays(values), tmp_path / "ckpt")
    outs = {n: reshard.from_host(np.zeros_like(v), RESTORED[n], TOPOLOGY) for n, v in values.items()}
    stats = reshard.restore_checkpoint_into(tmp_path / "ckpt", outs)
    assert stats.data_bytes_read > 0
    assert_holds(outs, values)
    frozen = {d: np.zeros(4, np.int64) for d in (3, 1)}
    for piece in frozen.values():
        piece.flags.writeable = False
    read_only = reshard.ShardedArray.from_shards((8,), np.int64, RESTORED["layers.0.b"], frozen, TOPOLOGY)
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        reshard.restore_checkpoint_into(tmp_path / "ckpt", {"layers.0.b": read_only})
    assert not frozen[3].any()
    wrong = {"embed": reshard.from_host(np.zeros((16, 24), np.float64), RESTORED["embed"], TOPOLOGY)}
    with pytest.raises(errors.InvalidArgumentError):
        reshard.restore_checkpoint_into(tmp_path / "ckpt", wrong)


def test_async_save_stages_then_writes_in_the_background(tmp_path, rng):
    values = model(rng)
    arrays = saved_arrays(values)
    handle = reshard.save_checkpoint_async(arrays, tmp_path / "ckpt", staging_bytes=256)
    for array in arrays.values():  # the arrays may change at once: the save has its copies
        for shard in array.shards:
            shard.data[...] = 0
    # wait() releases the GIL: another thread runs meanwhile.
    ticks = []
    ticker = threading.Thread(target=lambda: ticks.extend(range(1000)))
    ticker.start()
    stats = handle.wait()
    ticker.join()
    assert handle.ready() and len(ticks) == 1000
    assert stats.waves >= 2 and stats.bytes_written == sum(v.nbytes for v in values.values())
    with pytest.raises(errors.InvalidArgumentError, match="already"):
        handle.wait()
    assert_holds(reshard.restore_checkpoint(tmp_path / "ckpt", RESTORED, TOPOLOGY), values)
    # A failing async save raises from wait(), typed.
    bad = reshard.save_checkpoint_async(arrays, tmp_path / "ckpt", replace=False)
    with pytest.raises(errors.InvalidArgumentError):
        bad.wait()
    # A handle dropped without wait() finishes its save.
    reshard.save_checkpoint_async(arrays, tmp_path / "ckpt2")
    assert (tmp_path / "ckpt2" / "manifest.json").exists()


def test_a_damaged_checkpoint_raises_the_checksum_error(tmp_path, rng):
    values = model(rng)
    reshard.save_checkpoint(saved_arrays(values), tmp_path / "ckpt")
    data_files = sorted((tmp_path / "ckpt").glob("*.safetensors"))
    assert data_files
    f = reshard.safetensors.safe_open(data_files[0])
    first = f.tensors[0]
    offset = f.data_start + first.data_offsets[0]
    raw = bytearray(data_files[0].read_bytes())
    raw[offset] ^= 0x01
    data_files[0].write_bytes(bytes(raw))
    with pytest.raises(errors.ChecksumMismatchError) as caught:
        reshard.restore_checkpoint(tmp_path / "ckpt", RESTORED, TOPOLOGY)
    assert isinstance(caught.value, ValueError) and data_files[0].name in str(caught.value)


def test_convert_checkpoint_to_safetensors_read_back_by_the_reference(tmp_path, rng):
    values = model(rng)
    reshard.save_checkpoint(saved_arrays(values), tmp_path / "ckpt")
    result = reshard.convert(tmp_path / "ckpt", tmp_path / "model.safetensors")
    assert result.tensors == len(values) and result.files == 1
    theirs = safetensors.numpy.load_file(str(tmp_path / "model.safetensors"))
    assert sorted(theirs) == sorted(values)
    for name, v in values.items():
        assert theirs[name].shape == v.shape and theirs[name].tobytes() == v.tobytes()
    # A file to a checkpoint laid out by rules, and back to a folder cast to bf16.
    mesh = reshard.Mesh(np.arange(4), ("model",))
    reshard.convert(tmp_path / "model.safetensors", tmp_path / "ckpt4", mesh=mesh,
                    rules=[("embed", P(None, "model")), ("layers.*", P("model"))])
    back = reshard.restore_checkpoint(tmp_path / "ckpt4", RESTORED, TOPOLOGY)
    assert_holds(back, values)
    reshard.convert(tmp_path / "ckpt4", tmp_path / "hf", dtype="bf16")
    folder = reshard.hf.load_folder(tmp_path / "hf")
    assert folder["embed"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(folder["embed"], values["embed"].astype(ml_dtypes.bfloat16))
    with pytest.raises(errors.InvalidArgumentError, match="mesh"):
        reshard.convert(tmp_path / "model.safetensors", tmp_path / "x", output="checkpoint")


def test_merge_lora_adds_the_scaled_delta(tmp_path, rng):
    import json

    gen = np.random.default_rng(rng.randrange(2**32))
    module = "model.layers.0.self_attn.q_proj"
    base = {module + ".weight": gen.standard_normal((6, 5)).astype(np.float32),
            "model.norm.weight": gen.standard_normal(5).astype(np.float32)}
    a = gen.standard_normal((2, 5)).astype(np.float32)
    b = gen.standard_normal((6, 2)).astype(np.float32)
    (tmp_path / "base").mkdir()
    (tmp_path / "adapter").mkdir()
    reshard.safetensors.save_file(base, tmp_path / "base" / "model.safetensors")
    (tmp_path / "base" / "config.json").write_text('{"torch_dtype": "float32"}')
    reshard.safetensors.save_file({f"base_model.model.{module}.lora_A.weight": a,
                                   f"base_model.model.{module}.lora_B.weight": b},
                                  tmp_path / "adapter" / "adapter_model.safetensors")
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": 2, "lora_alpha": 8, "target_modules": ["q_proj"]}))
    summary = reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "merged")
    assert (summary.tensors, summary.merged, summary.carried) == (2, 1, ["config.json"])
    with pytest.deprecated_call(match="carried"):  # the old name, for one release
        assert summary.copied == summary.carried
    merged = safetensors.numpy.load_file(str(tmp_path / "merged" / "model.safetensors"))
    # f32 sums in another order: where base and delta nearly cancel, the error
    # is a few ulps of the terms (of order 1), not of the result.
    np.testing.assert_allclose(merged[module + ".weight"], base[module + ".weight"] + (b @ a) * 4.0, rtol=1e-6,
                               atol=1e-5)
    assert merged["model.norm.weight"].tobytes() == base["model.norm.weight"].tobytes()
    # Any thread count writes the same bytes; a count that is not one is refused by name, nothing written.
    reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "threads", threads=3, block_bytes=40)
    assert ((tmp_path / "threads" / "model.safetensors").read_bytes()
            == (tmp_path / "merged" / "model.safetensors").read_bytes())
    # block_bytes' old name, for one release: a DeprecationWarning, the same bytes; never both names.
    with pytest.deprecated_call(match="block_bytes"):
        reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "old-name", threads=3, chunk_bytes=40)
    assert ((tmp_path / "old-name" / "model.safetensors").read_bytes()
            == (tmp_path / "merged" / "model.safetensors").read_bytes())
    with pytest.raises(errors.InvalidArgumentError, match="^chunk_bytes: "):
        reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "bad", chunk_bytes=40, block_bytes=80)
    with pytest.raises(errors.InvalidArgumentError, match="threads"):
        reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "bad", threads=-1)
    with pytest.raises(errors.ArgumentTypeError, match="threads"):
        reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "bad", threads="2")
    assert not (tmp_path / "bad").exists()
    (tmp_path / "adapter" / "adapter_model.safetensors").unlink()
    reshard.safetensors.save_file({"base_model.model.model.layers.9.q_proj.lora_A.weight": a,
                                   "base_model.model.model.layers.9.q_proj.lora_B.weight": b},
                                  tmp_path / "adapter" / "adapter_model.safetensors")
    with pytest.raises(errors.MissingTensorError, match="layers.9"):
        reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "merged2")
