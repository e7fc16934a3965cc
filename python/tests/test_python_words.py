"""The Python API in Python's words (issue 18): errors name the Python argument and are
reshard's typed exceptions, configs are taken as dicts, rules fall through on a rank they do
not fit unless strict, an adapter folder imports with its configs alone, and the messages for
ordinary mistakes say what is wrong (a mesh larger than the topology, a damaged data file, a
file where a folder should be)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import safetensors.numpy

import reshard
from capability import import_or_skip
from reshard import P, errors

LAYERS, EMBED, KV, QPG, HEAD_DIM, MLP, VOCAB, R = 2, 8, 2, 2, 2, 16, 16, 2
HEADS = KV * QPG
STACKED = "transformer.layers.stacked."
CONFIG = {"model_type": "llama", "hidden_size": EMBED, "num_attention_heads": HEADS, "num_key_value_heads": KV,
          "head_dim": HEAD_DIM, "intermediate_size": MLP, "vocab_size": VOCAB, "num_hidden_layers": LAYERS}
TOPOLOGY = reshard.Topology.uniform(8, 1)
MESH = reshard.Mesh(np.arange(8).reshape(2, 4), ("data", "model"))


def llama(gen, lora=False):
    """A small Llama in the levanter-llama map's framework names and shapes."""
    def f(*shape):
        return gen.standard_normal(shape).astype(np.float32)

    values = {
        "embeddings.token_embeddings.weight": f(VOCAB, EMBED),
        STACKED + "self_attn.q_proj.weight": f(LAYERS, KV, QPG, HEAD_DIM, EMBED),
        STACKED + "self_attn.k_proj.weight": f(LAYERS, KV, HEAD_DIM, EMBED),
        STACKED + "self_attn.v_proj.weight": f(LAYERS, KV, HEAD_DIM, EMBED),
        STACKED + "self_attn.o_proj.weight": f(LAYERS, EMBED, HEADS, HEAD_DIM),
        STACKED + "mlp.gate_proj.weight": f(LAYERS, MLP, EMBED),
        STACKED + "mlp.up_proj.weight": f(LAYERS, MLP, EMBED),
        STACKED + "mlp.down_proj.weight": f(LAYERS, EMBED, MLP),
        STACKED + "input_layernorm.weight": f(LAYERS, EMBED),
        STACKED + "post_attention_layernorm.weight": f(LAYERS, EMBED),
        "transformer.norm.weight": f(EMBED),
        "lm_head.weight": f(VOCAB, EMBED),
    }
    if lora:
        values[STACKED + "self_attn.q_proj.lora.lora_A.weight"] = f(LAYERS, R, EMBED)
        values[STACKED + "self_attn.q_proj.lora.lora_B.weight"] = f(LAYERS, KV, QPG, HEAD_DIM, R)
    return values


def replicated(values):
    sharding = reshard.NamedSharding(MESH, P())
    return {n: reshard.from_host(v, sharding, TOPOLOGY) for n, v in values.items()}


@pytest.fixture
def gen(rng):
    return np.random.default_rng(rng.randrange(2**32))


# Item 5: errors speak Python.

def test_replacing_is_advised_as_the_python_argument(tmp_path, gen):
    arrays = replicated({"w": gen.standard_normal((8, 4)).astype(np.float32)})
    reshard.save_checkpoint(arrays, tmp_path / "ckpt")
    reshard.convert(tmp_path / "ckpt", tmp_path / "m.safetensors")
    reshard.export(arrays, tmp_path / "hf", json.dumps({"rules": [{"from": "w", "to": "w"}]}), hf_config={})
    calls = {
        "save_checkpoint": lambda: reshard.save_checkpoint(arrays, tmp_path / "ckpt", replace=False),
        "convert": lambda: reshard.convert(tmp_path / "ckpt", tmp_path / "m.safetensors"),
        "export": lambda: reshard.export(arrays, tmp_path / "hf", json.dumps({"rules": [{"from": "w", "to": "w"}]})),
    }
    for name, call in calls.items():
        with pytest.raises(errors.AlreadyExistsError) as caught:
            call()
        message = str(caught.value)
        assert "replace=True" in message and "--" not in message, (name, message)
        assert isinstance(caught.value, errors.InvalidArgumentError) and isinstance(caught.value, FileExistsError)


def test_jax_partition_specs_and_size_strings_are_taken_and_wrong_types_named(tmp_path, gen):
    jax_sharding = import_or_skip("jax.sharding")
    theirs = reshard.NamedSharding(MESH, jax_sharding.PartitionSpec(None, ("data", "model")))
    assert theirs == reshard.NamedSharding(MESH, P(None, ("data", "model")))
    with pytest.raises(errors.InvalidArgumentError, match="spec: expected a PartitionSpec"):
        reshard.NamedSharding(MESH, 5)
    # The same size strings as the command line's --max-shard-size.
    values = {f"w{i}": gen.standard_normal((64, 64)).astype(np.float32) for i in range(3)}  # 16 kB each
    reshard.convert(_safetensors(tmp_path, values), tmp_path / "hf", max_shard_size="20KB")
    assert len(list((tmp_path / "hf").glob("model-*.safetensors"))) == 3
    with pytest.raises(errors.ParseError, match="max_shard_size"):
        reshard.convert(tmp_path / "in.safetensors", tmp_path / "hf2", max_shard_size="20 parsecs")
    with pytest.raises(errors.ArgumentTypeError, match="max_shard_size"):
        reshard.convert(tmp_path / "in.safetensors", tmp_path / "hf2", max_shard_size=2.5)
    # Metadata maps str to str: another value is refused, naming its key (a restore could not give it back).
    arrays = replicated({"w": values["w0"]})
    with pytest.raises(errors.ArgumentTypeError, match="'step'"):
        reshard.save_checkpoint(arrays, tmp_path / "ckpt", metadata={"step": 5})
    assert not (tmp_path / "ckpt").exists()


def _safetensors(tmp_path, values):
    path = tmp_path / "in.safetensors"
    safetensors.numpy.save_file(values, str(path))
    return path


def test_restore_names_the_tensor_a_sharding_does_not_divide_and_presets_are_listed(tmp_path, gen):
    arrays = replicated({"layers.0.w": gen.standard_normal((6, 4)).astype(np.float32)})
    reshard.save_checkpoint(arrays, tmp_path / "ckpt")
    with pytest.raises(errors.IndivisibleError, match="layers.0.w"):
        reshard.restore_checkpoint(tmp_path / "ckpt", {"layers.0.w": reshard.NamedSharding(MESH, P("model"))})
    with pytest.raises(errors.InvalidArgumentError, match="unknown preset 'levanter-lama'; presets: levanter-llama"):
        reshard.export(tmp_path / "ckpt", tmp_path / "hf", "levanter-lama")


# Item 4: configs as dicts or JSON, and nothing silent.

def test_configs_are_dicts_or_json_and_a_missing_config_warns(tmp_path, gen):
    values = llama(gen, lora=True)
    arrays = replicated(values)
    reshard.export(arrays, tmp_path / "hf", "levanter-llama", hf_config=CONFIG)
    assert json.loads((tmp_path / "hf" / "config.json").read_text()) == CONFIG
    reshard.export(arrays, tmp_path / "hf2", "levanter-llama", hf_config=json.dumps(CONFIG))
    assert json.loads((tmp_path / "hf2" / "config.json").read_text()) == CONFIG
    reshard.export(arrays, tmp_path / "adapter", "levanter-llama", kind="adapter",
                   lora_config={"peft_type": "LORA", "r": R, "lora_alpha": 2 * R})
    assert json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["r"] == R
    with pytest.warns(errors.MissingConfigWarning, match="config.json"):
        reshard.export(arrays, tmp_path / "bare", "levanter-llama")
    with pytest.raises(errors.InvalidArgumentError, match="lora_config=") as caught:
        reshard.export(arrays, tmp_path / "adapter2", "levanter-llama", kind="adapter")
    assert "reshard.lora_config" not in str(caught.value)
    with pytest.raises(errors.ArgumentTypeError, match="hf_config"):
        reshard.export(arrays, tmp_path / "hf3", "levanter-llama", hf_config=["not", "a", "config"])
    assert not (tmp_path / "adapter2").exists() and not (tmp_path / "hf3").exists()


# Item 3: rules that do not fit a tensor's rank fall through unless strict.

def test_the_readme_rule_lays_out_a_llama_and_strict_refuses_the_misfit(tmp_path, gen):
    values = llama(gen)
    reshard.export(replicated(values), tmp_path / "hf", "levanter-llama", hf_config=CONFIG)
    mesh = reshard.Mesh(np.arange(8).reshape(4, 2), ("data", "model"))  # "model" divides every second dimension
    model = reshard.import_model(tmp_path / "hf", "levanter-llama", mesh, rules=[("*", P(None, "model"))])
    assert model["transformer.norm.weight"].sharding.spec == P()
    assert model["lm_head.weight"].sharding.spec == P(None, "model")
    for name, array in model.items():
        np.testing.assert_array_equal(reshard.to_host(array), values[name])
    with pytest.raises(errors.RankError, match="transformer.norm.weight"):
        reshard.import_model(tmp_path / "hf", "levanter-llama", mesh, rules=[("*", P(None, "model"))], strict=True)
    # JAX's P in rules, as in NamedSharding; a rule that is no pair is named by its index.
    jax_sharding = import_or_skip("jax.sharding")
    by_jax = reshard.import_model(tmp_path / "hf", "levanter-llama", MESH,
                                  rules=[("lm_head.*", jax_sharding.PartitionSpec("model"))])
    assert by_jax["lm_head.weight"].sharding.spec == P("model")
    with pytest.raises(errors.InvalidArgumentError, match=r"rules\[1\]"):
        reshard.import_model(tmp_path / "hf", "levanter-llama", MESH, rules=[("*", P()), "lm_head.* model"])


# Item 7: an adapter folder alone takes its sizes from its configs.

def test_an_adapter_folder_alone_imports_with_its_base_config(tmp_path, gen):
    values = llama(gen, lora=True)
    arrays = replicated(values)
    reshard.export(arrays, tmp_path / "hf", "levanter-llama", hf_config=CONFIG)
    reshard.export(arrays, tmp_path / "adapter", "levanter-llama", kind="adapter",
                   lora_config={"peft_type": "LORA", "r": R, "lora_alpha": 2 * R})
    lora = [n for n in values if ".lora." in n]
    by_base = reshard.import_model(tmp_path / "adapter", "levanter-llama", MESH, best_effort="model",
                                   base=tmp_path / "hf")
    assert sorted(by_base) == sorted(lora)
    for name in lora:
        np.testing.assert_array_equal(reshard.to_host(by_base[name]), values[name])
    config_path = tmp_path / "adapter" / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["base_model_name_or_path"] = os.fspath(tmp_path / "hf")
    config_path.write_text(json.dumps(config))
    by_config = reshard.import_model(tmp_path / "adapter", "levanter-llama", MESH, best_effort="model")
    for name in lora:
        np.testing.assert_array_equal(reshard.to_host(by_config[name]), values[name])


# Item 9: the words for ordinary mistakes.

def test_mistakes_are_described_as_they_are(tmp_path, gen):
    big_mesh = reshard.Mesh(np.arange(16).reshape(4, 4), ("data", "model"))
    with pytest.raises(errors.UnknownDeviceError) as caught:
        reshard.from_host(np.zeros((8, 8), np.float32), reshard.NamedSharding(big_mesh, P("data")), TOPOLOGY)
    message = str(caught.value)
    assert "8, 9" in message and "has 8 devices (0..7)" in message, message
    assert "0..8" not in message

    reshard.save_checkpoint(replicated({"weights": gen.standard_normal((4, 4)).astype(np.float32)}), tmp_path / "ckpt")
    data = next(p for p in (tmp_path / "ckpt").iterdir() if p.suffix == ".safetensors")
    raw = bytearray(data.read_bytes())
    at = raw.index(b"weights")
    raw[at] ^= 0x01  # still valid JSON: the key's first letter flipped
    data.write_bytes(bytes(raw))
    with pytest.raises(errors.ChecksumMismatchError, match=data.name):
        reshard.restore_checkpoint(tmp_path / "ckpt", {"weights": reshard.NamedSharding(MESH, P())})

    (tmp_path / "a-file").write_text("")
    with pytest.raises(errors.InvalidArgumentError, match="a-file is a file"):
        reshard.save_checkpoint(replicated({"w": np.zeros(4, np.float32)}), tmp_path / "a-file" / "ckpt")


def test_a_bad_map_is_one_error_from_text_and_from_a_file(tmp_path, gen):
    arrays = replicated({"w": gen.standard_normal((4, 4)).astype(np.float32)})
    for text in ('{"rules": [{"from": "w", "to": "w", "dtype": "i32"}]}', '{"rules": [{"from": "w{", "to": "w"}]}'):
        (tmp_path / "map.json").write_text(text)
        for given in (text, str(tmp_path / "map.json")):
            with pytest.raises(errors.InvalidConfigError):
                reshard.export(arrays, tmp_path / "out", given, hf_config={})
    assert not (tmp_path / "out").exists()


# Item 8: the command line comes with the package, and Python has inspect and verify.

def test_the_package_installs_the_command_and_python_inspects_and_verifies(tmp_path, gen):
    import subprocess
    import sys

    command = os.path.join(os.path.dirname(sys.executable), "reshard")
    run = subprocess.run([command, "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "verify" in run.stdout and "inspect" in run.stdout, run.stderr

    values = {"b": gen.standard_normal((4, 6)).astype(np.float32), "a": np.arange(5, dtype=np.int64)}
    path = _safetensors(tmp_path, values)
    seen = reshard.inspect(path)
    assert seen["format"] == "safetensors"
    assert {t["name"]: (t["dtype"], tuple(t["shape"]), t["bytes"]) for t in seen["tensors"]} == {
        "a": ("I64", (5,), 40), "b": ("F32", (4, 6), 96)}
    assert reshard.verify(path)["tensors"] == 2

    reshard.save_checkpoint(replicated({"w": values["b"]}), tmp_path / "ckpt")
    seen = reshard.inspect(tmp_path / "ckpt")
    assert seen["format"] == "checkpoint" and [t["name"] for t in seen["tensors"]] == ["w"]
    chunk = seen["tensors"][0]["chunks"][0]
    assert reshard.verify(tmp_path / "ckpt")["bytes"] == values["b"].nbytes
    data = tmp_path / "ckpt" / chunk["file"]
    raw = bytearray(data.read_bytes())
    raw[chunk["offset"] + 5] ^= 0x10  # one bit of one element
    data.write_bytes(bytes(raw))
    with pytest.raises(errors.ChecksumMismatchError, match="w"):
        reshard.verify(tmp_path / "ckpt")


def test_paths_and_the_argument_order_are_checked_by_name(tmp_path, gen):
    """Every path is a str or os.PathLike (else ArgumentTypeError naming the argument, not os.fspath's
    bare TypeError), and a call in another order than the one shape (what is read, then where it
    goes) is refused by name before anything is written."""
    arrays = replicated({"w": gen.standard_normal(4).astype(np.float32)})
    for call, argument in [
        (lambda: reshard.save_checkpoint(arrays, {"not": "a path"}), "path"),
        (lambda: reshard.restore_checkpoint(7, {}), "path"),
        (lambda: reshard.convert(tmp_path / "x", None), "dst"),
        (lambda: reshard.merge_lora(tmp_path / "b", 3.5, tmp_path / "out"), "adapter"),
        (lambda: reshard.inspect(b"bytes are not a path here"), "path"),
        # The order before this change, save_checkpoint(path, arrays):
        (lambda: reshard.save_checkpoint(tmp_path / "ckpt", arrays), "arrays"),
    ]:
        with pytest.raises(errors.ArgumentTypeError, match=f"^{argument}: "):
            call()
    assert not os.listdir(tmp_path)
    with pytest.raises(TypeError):  # options are keyword-only
        reshard.save_checkpoint(arrays, tmp_path / "ckpt", {"step": "1"})
