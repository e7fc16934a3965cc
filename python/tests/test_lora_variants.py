"""merge_lora for the PEFT LoRA variants, against loops written here from PEFT's own
definitions (peft/tuners/lora/layer.py and dora.py), element by element:

- LoRA:  W'[o, i] = W[o, i] + s * sum_k B[o, k] A[k, i]; with fan_in_fan_out
  W is [in, out] and the delta is transposed.
- DoRA:  V = W + ΔW; W' = (m[o] / ||V[o, :]||) * V per output feature o (a
  column of W with fan_in_fan_out).
- embeddings: W [V, H], lora_embedding_A [r, V], lora_embedding_B [H, r];
  ΔW = (B @ A)^T * s (and DoRA over the columns, as fan_in_fan_out).
- lora_bias: bias' = bias + s * lora_B.bias.
- modules_to_save: the adapter's copy replaces the base tensor.

reshard sums in f32, rank by rank, and rounds once to W's dtype; the loops do
the same, so the f32 results are compared bit for bit.
"""

from __future__ import annotations

import json
import math
import warnings

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

import reshard
from reshard import P, errors

F32 = np.float32
PREFIX = "base_model.model."


def lora_delta(a: np.ndarray, b: np.ndarray, scaling: float, fan_in_fan_out: bool) -> np.ndarray:
    """W + ΔW's ΔW part, in stored W's layout, each element an f32 sum over k in order."""
    r, n_in = a.shape
    n_out = b.shape[0]
    delta = np.zeros((n_out, n_in), F32)
    for o in range(n_out):
        for i in range(n_in):
            acc = F32(0)
            for k in range(r):
                acc = F32(acc + F32(b[o, k]) * F32(a[k, i]))
            delta[o, i] = acc
    delta = delta.T if fan_in_fan_out else delta
    return delta, F32(scaling)


def merged_f32(w: np.ndarray, a, b, scaling, fan_in_fan_out) -> np.ndarray:
    delta, s = lora_delta(a, b, scaling, fan_in_fan_out)
    out = np.empty(w.shape, F32)
    for idx in np.ndindex(w.shape):
        out[idx] = F32(F32(w[idx]) + F32(delta[idx] * s))
    return out


def dora(v: np.ndarray, magnitude: np.ndarray, fan_in_fan_out: bool) -> np.ndarray:
    """m[o] / ||row o of V|| times V, the norm over an output feature's inputs."""
    rows = v.T if fan_in_fan_out else v
    out = np.empty(rows.shape, F32)
    for o in range(rows.shape[0]):
        norm = F32(math.sqrt(sum(float(x) * float(x) for x in rows[o])))
        factor = F32(F32(magnitude[o]) / norm)
        for i in range(rows.shape[1]):
            out[o, i] = F32(factor * rows[o, i])
    return out.T if fan_in_fan_out else out


def write_pair(tmp_path, base: dict, adapter: dict, config: dict):
    (tmp_path / "base").mkdir(exist_ok=True)
    (tmp_path / "adapter").mkdir(exist_ok=True)
    reshard.safetensors.save_file(base, tmp_path / "base" / "model.safetensors")
    (tmp_path / "base" / "config.json").write_text('{"dtype": "float32", "model_type": "llama"}')
    reshard.safetensors.save_file(adapter, tmp_path / "adapter" / "adapter_model.safetensors")
    full = {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]}
    full.update(config)
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps(full))


def merge(tmp_path, name="merged", **kwargs):
    reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / name, block_bytes=24, **kwargs)
    return safetensors.numpy.load_file(str(tmp_path / name / "model.safetensors"))


@pytest.mark.parametrize("fan_in_fan_out", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_dora_rescales_each_output_feature_by_magnitude_over_norm(tmp_path, rng, fan_in_fan_out, dtype):
    gen = np.random.default_rng(rng.randrange(2**32))
    n_out, n_in, r = 5, 7, 3
    module = "model.layers.0.self_attn.q_proj"
    w = gen.standard_normal((n_in, n_out) if fan_in_fan_out else (n_out, n_in)).astype(dtype)
    a = gen.standard_normal((r, n_in)).astype(F32)
    b = gen.standard_normal((n_out, r)).astype(F32)
    m = (gen.random(n_out) + 0.5).astype(F32)
    write_pair(tmp_path, {module + ".weight": w},
               {f"{PREFIX}{module}.lora_A.weight": a, f"{PREFIX}{module}.lora_B.weight": b,
                f"{PREFIX}{module}.lora_magnitude_vector": m},
               {"r": r, "lora_alpha": 6, "use_dora": True, "fan_in_fan_out": fan_in_fan_out})
    out = merge(tmp_path)[module + ".weight"]
    expected = dora(merged_f32(w.astype(F32), a, b, 2.0, fan_in_fan_out), m, fan_in_fan_out).astype(dtype)
    assert out.dtype == w.dtype
    assert out.tobytes() == expected.tobytes()
    # Each output feature's norm is then the magnitude (up to the rounding of W's dtype).
    norms = np.linalg.norm(out.astype(np.float64), axis=0 if fan_in_fan_out else 1)
    np.testing.assert_allclose(norms, m, rtol=1e-5 if dtype == np.float32 else 2e-2)


def test_embedding_lora_transposes_the_roles_and_dora_runs_over_columns(tmp_path, rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    vocab, hidden, r = 9, 4, 2
    emb = "model.embed_tokens"
    w = gen.standard_normal((vocab, hidden)).astype(F32)
    saved = gen.standard_normal((vocab, hidden)).astype(F32)  # the saved base layer replaces W
    a = gen.standard_normal((r, vocab)).astype(F32)
    b = gen.standard_normal((hidden, r)).astype(F32)
    write_pair(tmp_path, {emb + ".weight": w, "model.norm.weight": np.ones(hidden, F32)},
               {f"{PREFIX}{emb}.lora_embedding_A": a, f"{PREFIX}{emb}.lora_embedding_B": b,
                f"{PREFIX}{emb}.base_layer.weight": saved},
               {"r": r, "lora_alpha": 2, "target_modules": ["embed_tokens"]})
    out = merge(tmp_path)
    assert out[emb + ".weight"].tobytes() == merged_f32(saved, a, b, 1.0, True).tobytes()
    assert out["model.norm.weight"].tobytes() == np.ones(hidden, F32).tobytes()

    m = (gen.random(hidden) + 0.5).astype(F32)
    reshard.safetensors.save_file({f"{PREFIX}{emb}.lora_embedding_A": a, f"{PREFIX}{emb}.lora_embedding_B": b,
                                   f"{PREFIX}{emb}.lora_magnitude_vector": m},
                                  tmp_path / "adapter" / "adapter_model.safetensors")
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    out = merge(tmp_path, "dora")
    assert out[emb + ".weight"].tobytes() == dora(merged_f32(w, a, b, 1.0, True), m, True).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_lora_bias_adds_the_scaled_bias_and_modules_to_save_replace(tmp_path, rng, dtype):
    gen = np.random.default_rng(rng.randrange(2**32))
    q, head = "model.layers.0.self_attn.q_proj", "lm_head"
    base = {q + ".weight": gen.standard_normal((4, 6)).astype(dtype), q + ".bias": gen.standard_normal(4).astype(dtype),
            head + ".weight": gen.standard_normal((10, 6)).astype(dtype)}
    a = gen.standard_normal((2, 6)).astype(F32)
    b = gen.standard_normal((4, 2)).astype(F32)
    lora_bias = gen.standard_normal(4).astype(F32)
    head_copy = gen.standard_normal((10, 6)).astype(dtype)
    write_pair(tmp_path, base,
               {f"{PREFIX}{q}.lora_A.weight": a, f"{PREFIX}{q}.lora_B.weight": b, f"{PREFIX}{q}.lora_B.bias": lora_bias,
                f"{PREFIX}{head}.weight": head_copy},
               {"lora_alpha": 3, "use_rslora": True, "lora_bias": True, "modules_to_save": ["lm_head"]})
    out = merge(tmp_path)
    s = F32(3 / math.sqrt(2))
    expected_bias = np.array([F32(F32(x) + F32(y * s)) for x, y in zip(base[q + ".bias"].astype(F32), lora_bias)])
    assert out[q + ".bias"].tobytes() == expected_bias.astype(dtype).tobytes()
    assert out[q + ".weight"].tobytes() == merged_f32(base[q + ".weight"].astype(F32), a, b, s, False).astype(dtype).tobytes()
    assert out[head + ".weight"].tobytes() == head_copy.tobytes()


def test_what_peft_would_not_merge_is_refused_by_name_and_nothing_is_written(tmp_path, rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    q = "model.layers.0.self_attn.q_proj"
    base = {q + ".weight": gen.standard_normal((4, 6)).astype(F32), "lm_head.weight": np.zeros((3, 6), F32)}
    factors = {f"{PREFIX}{q}.lora_A.weight": np.ones((2, 6), F32), f"{PREFIX}{q}.lora_B.weight": np.ones((4, 2), F32)}
    cases = [
        ({f"{PREFIX}{q}.lora_E": np.ones(2, F32)}, {}, errors.UnsupportedError, "lora_E"),
        ({}, {"use_dora": True}, errors.UnsupportedError, "use_dora"),
        ({f"{PREFIX}{q}.lora_magnitude_vector": np.ones(4, F32)}, {}, errors.UnsupportedError, "use_dora is false"),
        ({f"{PREFIX}{q}.lora_magnitude_vector": np.ones(3, F32)}, {"use_dora": True}, errors.InvalidArgumentError,
         "lora_magnitude_vector"),
        ({f"{PREFIX}{q}.lora_B.bias": np.ones(4, F32)}, {}, errors.UnsupportedError, "lora_bias is false"),
        ({f"{PREFIX}{q}.lora_B.bias": np.ones(4, F32)}, {"lora_bias": True}, errors.MissingTensorError,
         "self_attn.q_proj.bias"),
        ({f"{PREFIX}lm_head.weight": np.ones((3, 6), F32)}, {}, errors.UnsupportedError, "modules_to_save"),
        ({f"{PREFIX}lm_head.weight": np.ones((3, 5), F32)}, {"modules_to_save": ["lm_head"]},
         errors.InvalidArgumentError, r"\[3, 5\]"),
        ({}, {"peft_type": "IA3"}, errors.UnsupportedError, "IA3"),
        ({}, {"modules_to_save": "lm_head"}, errors.InvalidConfigError, "modules_to_save"),
    ]
    for i, (extra, config, error, message) in enumerate(cases):
        write_pair(tmp_path, base, {**factors, **extra}, config)
        with pytest.raises(error, match=message):
            reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / f"out{i}")
        assert not (tmp_path / f"out{i}").exists()


def test_a_base_without_config_json_merges_with_a_warning(tmp_path, rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    q = "model.layers.0.self_attn.q_proj"
    write_pair(tmp_path, {q + ".weight": gen.standard_normal((4, 6)).astype(F32)},
               {f"{PREFIX}{q}.lora_A.weight": np.ones((2, 6), F32), f"{PREFIX}{q}.lora_B.weight": np.ones((4, 2), F32)},
               {})
    (tmp_path / "base" / "config.json").unlink()
    with pytest.warns(UserWarning, match="no config.json"):
        summary = reshard.merge_lora(tmp_path / "base", tmp_path / "adapter", tmp_path / "merged")
    assert summary.carried == [] and summary.warnings


def write_model_folder(folder, gen):
    folder.mkdir()
    reshard.safetensors.save_file({"w": gen.standard_normal((4, 3)).astype(F32), "step": np.arange(3, dtype=np.int32)},
                                  folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(
        {"dtype": "float32", "torch_dtype": "float32", "model_type": "llama", "text_config": {"dtype": "float32"}}))
    files = {"generation_config.json": '{"do_sample": false}', "tokenizer.json": '{"model": {}}',
             "tokenizer_config.json": "{}", "special_tokens_map.json": "{}", "chat_template.jinja": "{{ x }}"}
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / ".hidden").write_text("x")
    (folder / "pytorch_model.bin").write_bytes(b"not carried: weights in another format")
    return files


def test_convert_carries_the_folders_small_files_and_every_dtype_key_follows(tmp_path, rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    files = write_model_folder(tmp_path / "src", gen)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a folder with config.json: no warning
        result = reshard.convert(tmp_path / "src", tmp_path / "bf16", dtype="bf16")
    assert result.carried == sorted(["config.json", *files])
    for name, text in files.items():
        assert (tmp_path / "bf16" / name).read_text() == text
    assert not (tmp_path / "bf16" / ".hidden").exists() and not (tmp_path / "bf16" / "pytorch_model.bin").exists()
    config = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert (config["dtype"], config["torch_dtype"], config["text_config"]["dtype"]) == ("bfloat16",) * 3

    # Through a checkpoint and back: config.json and generation_config.json travel in its metadata.
    reshard.convert(tmp_path / "src", tmp_path / "ckpt", mesh=reshard.Mesh([0, 1], ("x",)), best_effort="x")
    back = reshard.convert(tmp_path / "ckpt", tmp_path / "back", dtype="f16")
    assert back.carried == ["config.json", "generation_config.json"]
    assert json.loads((tmp_path / "back" / "config.json").read_text())["dtype"] == "float16"
    assert (tmp_path / "back" / "generation_config.json").read_text() == files["generation_config.json"]
    # The configs became files; the weights' metadata is save_pretrained's.
    assert reshard.safetensors.safe_open(tmp_path / "back" / "model.safetensors").metadata() == {"format": "pt"}

    with pytest.warns(UserWarning, match="single .safetensors file"):
        reshard.convert(tmp_path / "src" / "model.safetensors", tmp_path / "from-file")
    assert sorted(p.name for p in (tmp_path / "from-file").iterdir()) == ["model.safetensors"]


def test_export_merges_and_writes_every_variant_from_a_framework_layout(tmp_path, rng):
    """export(kind="merged") from sharded arrays through a map that transposes: the same loops as
    merge_lora, bit for bit; kind="adapter" keeps every variant's key and config field."""
    gen = np.random.default_rng(rng.randrange(2**32))
    n_out, n_in, vocab, hidden, r = 4, 6, 8, 4, 2
    q, emb = "model.layers.0.self_attn.q_proj", "model.embed_tokens"
    framework = {
        "q_t": gen.standard_normal((n_in, n_out)).astype(F32),  # stored [in, out]: the map transposes it
        "q_bias": gen.standard_normal(n_out).astype(F32),
        "embed": gen.standard_normal((vocab, hidden)).astype(F32),
        "head": gen.standard_normal((vocab, hidden)).astype(F32),
        "q_a": gen.standard_normal((r, n_in)).astype(F32),
        "q_b": gen.standard_normal((n_out, r)).astype(F32),
        "q_lora_bias": gen.standard_normal(n_out).astype(F32),
        "q_m": (gen.random(n_out) + 0.5).astype(F32),
        "embed_a": gen.standard_normal((r, vocab)).astype(F32),
        "embed_b": gen.standard_normal((hidden, r)).astype(F32),
        "embed_m": (gen.random(hidden) + 0.5).astype(F32),
        "head_copy": gen.standard_normal((vocab, hidden)).astype(F32),
    }
    to = {"q_t": q + ".weight", "q_bias": q + ".bias", "embed": emb + ".weight", "head": "lm_head.weight",
          "q_a": f"{PREFIX}{q}.lora_A.weight", "q_b": f"{PREFIX}{q}.lora_B.weight",
          "q_lora_bias": f"{PREFIX}{q}.lora_B.bias", "q_m": f"{PREFIX}{q}.lora_magnitude_vector",
          "embed_a": f"{PREFIX}{emb}.lora_embedding_A", "embed_b": f"{PREFIX}{emb}.lora_embedding_B",
          "embed_m": f"{PREFIX}{emb}.lora_magnitude_vector", "head_copy": f"{PREFIX}lm_head.weight"}
    rules = [{"from": k, "to": v, **({"rearrange": "in out -> out in"} if k == "q_t" else {})} for k, v in to.items()]
    mesh = reshard.Mesh(np.arange(2), ("x",))
    specs = {"q_t": P("x"), "embed": P(None, "x"), "q_b": P("x"), "embed_m": P("x")}
    arrays = {n: reshard.from_host(v, reshard.NamedSharding(mesh, specs.get(n, P())), reshard.Topology.uniform(2, 1))
              for n, v in framework.items()}
    config = {"peft_type": "LORA", "r": r, "lora_alpha": 3, "alpha_pattern": {"embed_tokens": 2},
              "use_dora": True, "lora_bias": True, "modules_to_save": ["lm_head"]}
    reshard.export(arrays, tmp_path / "merged", json.dumps({"rules": rules}), kind="merged", lora_config=config,
                   hf_config={"model_type": "llama"})
    out = safetensors.numpy.load_file(str(tmp_path / "merged" / "model.safetensors"))
    assert sorted(out) == sorted([q + ".weight", q + ".bias", emb + ".weight", "lm_head.weight"])
    s_q, s_emb = F32(3 / r), F32(2 / r)
    v_q = merged_f32(framework["q_t"].T.copy(), framework["q_a"], framework["q_b"], s_q, False)
    assert out[q + ".weight"].tobytes() == dora(v_q, framework["q_m"], False).tobytes()
    v_emb = merged_f32(framework["embed"], framework["embed_a"], framework["embed_b"], s_emb, True)
    assert out[emb + ".weight"].tobytes() == dora(v_emb, framework["embed_m"], True).tobytes()
    bias = [F32(F32(x) + F32(y * s_q)) for x, y in zip(framework["q_bias"], framework["q_lora_bias"])]
    assert out[q + ".bias"].tobytes() == np.array(bias, F32).tobytes()
    assert out["lm_head.weight"].tobytes() == framework["head_copy"].tobytes()

    reshard.export(arrays, tmp_path / "adapter", json.dumps({"rules": rules}), kind="adapter", lora_config=config)
    adapter = safetensors.numpy.load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    assert sorted(adapter) == sorted(v for v in to.values() if v.startswith(PREFIX))
    for name, key in to.items():
        if key.startswith(PREFIX):
            assert adapter[key].tobytes() == framework[name].tobytes()
    written = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert (written["use_dora"], written["lora_bias"], written["modules_to_save"]) == (True, True, ["lm_head"])
    assert written["target_modules"] == ["embed_tokens", "q_proj"]

    del arrays["q_m"]  # use_dora without q_proj's magnitudes: refused by name, nothing written
    rules = [rule for rule in rules if rule["from"] != "q_m"]
    with pytest.raises(errors.UnsupportedError, match="use_dora.*lora_magnitude_vector"):
        reshard.export(arrays, tmp_path / "refused", json.dumps({"rules": rules}), kind="merged", lora_config=config)
    assert not (tmp_path / "refused").exists()
