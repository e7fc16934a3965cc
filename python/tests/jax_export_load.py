"""Run by test_jax_export.py in a fresh interpreter with 8 forced CPU devices:
reshard.jax.export writes a Levanter-Llama-shaped pytree, sharded over permuted
device orders, as Hugging Face files that the safetensors package reads back as
numpy computes them, and reshard.jax.load_pretrained reads them back onto other
shardings (and meshes) bit for bit; the same for q_proj's LoRA factors as a PEFT
adapter (kind="adapter"). argv[1]: the seed, argv[2]: a scratch folder.
Exits non-zero on a mismatch."""

from __future__ import annotations

import json
import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import reshard.jax as rjax  # noqa: E402
from reshard import errors  # noqa: E402

LAYERS, EMBED, KV, QPG, HEAD_DIM, MLP, VOCAB = 2, 16, 2, 2, 4, 32, 32
HEADS = KV * QPG
R = 2
SIZES = {"kv_heads": KV, "q_per_group": QPG, "head_dim": HEAD_DIM, "heads": HEADS}
STACKED = "transformer.layers.stacked"


def model_values(gen):
    def f(*shape, dtype=np.float32):
        return gen.standard_normal(shape).astype(dtype)

    return {
        "embeddings": {"token_embeddings": {"weight": f(VOCAB, EMBED)}},
        "transformer": {
            "layers": {"stacked": {
                "self_attn": {"q_proj": {"weight": f(LAYERS, KV, QPG, HEAD_DIM, EMBED)},
                              "k_proj": {"weight": f(LAYERS, KV, HEAD_DIM, EMBED)},
                              "v_proj": {"weight": f(LAYERS, KV, HEAD_DIM, EMBED, dtype=np.float16)},
                              "o_proj": {"weight": f(LAYERS, EMBED, HEADS, HEAD_DIM)}},
                "mlp": {"gate_proj": {"weight": f(LAYERS, MLP, EMBED)}, "up_proj": {"weight": f(LAYERS, MLP, EMBED)},
                        "down_proj": {"weight": f(LAYERS, EMBED, MLP)}},
                "input_layernorm": {"weight": f(LAYERS, EMBED)},
                "post_attention_layernorm": {"weight": f(LAYERS, EMBED)},
            }},
            "norm": {"weight": f(EMBED)},
        },
        "lm_head": {"weight": f(VOCAB, EMBED)},
    }


def specs_a():
    """A Levanter-like layout on ("data", "model")."""
    return {
        "embeddings": {"token_embeddings": {"weight": P("model", "data")}},
        "transformer": {
            "layers": {"stacked": {
                "self_attn": {"q_proj": {"weight": P(None, "data", None, None, "model")},
                              "k_proj": {"weight": P(None, None, "model", "data")},
                              "v_proj": {"weight": P(None, "data", None, "model")},
                              "o_proj": {"weight": P(None, "model", "data")}},
                "mlp": {"gate_proj": {"weight": P(None, "model", "data")}, "up_proj": {"weight": P("data", "model")},
                        "down_proj": {"weight": P(None, "data", "model")}},
                "input_layernorm": {"weight": P(None, "model")},
                "post_attention_layernorm": {"weight": P()},
            }},
            "norm": {"weight": P(("data", "model"))},
        },
        "lm_head": {"weight": P(("model", "data"))},
    }


def expected_hf(v):
    """The Hugging Face tensors numpy computes from the framework values."""
    s = v["transformer"]["layers"]["stacked"]
    out = {"model.embed_tokens.weight": v["embeddings"]["token_embeddings"]["weight"],
           "model.norm.weight": v["transformer"]["norm"]["weight"], "lm_head.weight": v["lm_head"]["weight"]}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out[p + "self_attn.q_proj.weight"] = s["self_attn"]["q_proj"]["weight"][i].reshape(HEADS * HEAD_DIM, EMBED)
        out[p + "self_attn.k_proj.weight"] = s["self_attn"]["k_proj"]["weight"][i].reshape(KV * HEAD_DIM, EMBED)
        out[p + "self_attn.v_proj.weight"] = s["self_attn"]["v_proj"]["weight"][i].reshape(KV * HEAD_DIM, EMBED)
        out[p + "self_attn.o_proj.weight"] = s["self_attn"]["o_proj"]["weight"][i].reshape(EMBED, HEADS * HEAD_DIM)
        for m in ("gate_proj", "up_proj", "down_proj"):
            out[p + f"mlp.{m}.weight"] = s["mlp"][m]["weight"][i]
        out[p + "input_layernorm.weight"] = s["input_layernorm"]["weight"][i]
        out[p + "post_attention_layernorm.weight"] = s["post_attention_layernorm"]["weight"][i]
    return out


def mesh(order, shape=(2, 4), axes=("data", "model")):
    by_id = {d.id: d for d in jax.devices()}
    return Mesh(np.array([by_id[d] for d in order], dtype=object).reshape(shape), axes)


def is_spec(x):
    return isinstance(x, P)


def check(cond, what):
    if not cond:
        raise SystemExit(f"mismatch: {what}")


def adapter_round_trip(gen, scratch, tree, mesh_a, mesh_b) -> None:
    """LoRA factors of q_proj beside the model: kind="adapter" writes them alone as a PEFT
    adapter (as numpy computes them), and load_pretrained reads the adapter back."""
    lora_a = gen.standard_normal((LAYERS, R, EMBED)).astype(np.float32)
    lora_b = gen.standard_normal((LAYERS, KV, QPG, HEAD_DIM, R)).astype(np.float32)
    q = tree["transformer"]["layers"]["stacked"]["self_attn"]["q_proj"]
    q["lora"] = {"lora_A": {"weight": jax.device_put(lora_a, NamedSharding(mesh_a, P(None, None, "model")))},
                 "lora_B": {"weight": jax.device_put(lora_b, NamedSharding(mesh_a, P(None, "data")))}}
    rjax.export(tree, scratch / "adapter", "levanter-llama", kind="adapter",
                lora_config=json.dumps({"peft_type": "LORA", "r": R, "lora_alpha": 2 * R}))
    config = json.loads((scratch / "adapter" / "adapter_config.json").read_text())
    check(config["r"] == R and config["target_modules"] == ["q_proj"], f"adapter_config.json {config}")
    theirs = safetensors.numpy.load_file(str(scratch / "adapter" / "adapter_model.safetensors"))
    prefix = "base_model.model.model.layers.{}.self_attn.q_proj."
    expected = {}
    for i in range(LAYERS):
        expected[prefix.format(i) + "lora_A.weight"] = lora_a[i]
        expected[prefix.format(i) + "lora_B.weight"] = lora_b[i].reshape(HEADS * HEAD_DIM, R)
    check(sorted(theirs) == sorted(expected), f"adapter names {sorted(theirs)}")
    for name, want in expected.items():
        check(theirs[name].tobytes() == want.tobytes(), name)
    back = rjax.load_pretrained(scratch / "adapter", "levanter-llama", mesh=mesh_b, best_effort="model",
                                sizes=SIZES)
    got = back["transformer"]["layers"]["stacked"]["self_attn"]["q_proj"]["lora"]
    check(np.asarray(got["lora_A"]["weight"]).tobytes() == lora_a.tobytes(), "lora_A loaded back")
    check(np.asarray(got["lora_B"]["weight"]).tobytes() == lora_b.tobytes(), "lora_B loaded back")
    print(f"adapter: {len(theirs)} factors equal to numpy's, loaded back")


def main() -> None:
    seed, scratch = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    gen = np.random.default_rng(seed)
    values = model_values(gen)
    orders = [[int(d) for d in gen.permutation(8)] for _ in range(3)]
    print("device orders", orders)
    mesh_a, mesh_b = mesh(orders[0]), mesh(orders[1])
    shardings_a = jax.tree_util.tree_map(lambda s: NamedSharding(mesh_a, s), specs_a(), is_leaf=is_spec)
    tree = jax.device_put(values, shardings_a)

    result = rjax.export(tree, scratch / "hf", "levanter-llama")
    expected = expected_hf(values)
    check(result.tensors == len(expected), f"{result.tensors} tensors written, {len(expected)} expected")
    theirs = {}
    for f in sorted((scratch / "hf").glob("*.safetensors")):
        theirs.update(safetensors.numpy.load_file(str(f)))
    check(sorted(theirs) == sorted(expected), f"names {sorted(theirs)}")
    for name, want in expected.items():
        check(theirs[name].dtype == want.dtype and theirs[name].tobytes() == want.tobytes(), name)
    print(f"export: {len(theirs)} tensors equal to numpy's")

    # Back onto another device order and other specs; one leaf on another mesh entirely.
    specs_b = specs_a()
    specs_b["embeddings"]["token_embeddings"]["weight"] = P("data", "model")
    specs_b["transformer"]["layers"]["stacked"]["mlp"]["down_proj"]["weight"] = P()
    shardings_b = jax.tree_util.tree_map(lambda s: NamedSharding(mesh_b, s), specs_b, is_leaf=is_spec)
    line = mesh(orders[2][:4], (4,), ("x",))
    shardings_b["lm_head"]["weight"] = NamedSharding(line, P("x"))
    shardings_b["transformer"]["norm"]["weight"] = jax.ShapeDtypeStruct((EMBED,), np.float32,
                                                                        sharding=NamedSharding(mesh_a, P()))
    back = rjax.load_pretrained(scratch / "hf", "levanter-llama", shardings_b, sizes=SIZES)
    flat_back = jax.tree_util.tree_leaves(back)
    want_shardings = jax.tree_util.tree_leaves(shardings_b, is_leaf=lambda x: isinstance(x, jax.ShapeDtypeStruct))
    for got, want, sharding in zip(flat_back, jax.tree_util.tree_leaves(values), want_shardings):
        sharding = getattr(sharding, "sharding", sharding)
        check(got.sharding == sharding, f"sharding {got.sharding} is not {sharding}")
        check(np.asarray(got).tobytes() == want.tobytes() and got.dtype == want.dtype, f"bytes of {sharding}")
        for shard in got.addressable_shards:
            check(np.asarray(shard.data).tobytes() == want[shard.index].tobytes(), f"shard on {shard.device}")
    check(jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(values), "tree structure")
    print("load_pretrained onto shardings: bytes equal")

    # A mesh with rules: the first matching glob lays out each tensor, nested dicts come back.
    rules = [("*.q_proj.weight", P(None, None, None, "model")), ("*.mlp.*", P(None, None, ("data", "model"))),
             ("embeddings.*", P("data"))]
    by_rules = rjax.load_pretrained(scratch / "hf", "levanter-llama", mesh=mesh_b, rules=rules, sizes=SIZES)
    check(jax.tree_util.tree_structure(by_rules) == jax.tree_util.tree_structure(values), "rules tree structure")
    q = by_rules["transformer"]["layers"]["stacked"]["self_attn"]["q_proj"]["weight"]
    check(q.sharding == NamedSharding(mesh_b, P(None, None, None, "model")), f"q sharding {q.sharding}")
    for got, want in zip(jax.tree_util.tree_leaves(by_rules), jax.tree_util.tree_leaves(values)):
        check(np.asarray(got).tobytes() == want.tobytes(), "rules bytes")
    print("load_pretrained by mesh and rules: bytes equal")

    try:
        rjax.load_pretrained(scratch / "hf", "levanter-llama", {"nothing": {"here": NamedSharding(mesh_a, P())}},
                             sizes=SIZES)
    except errors.MissingTensorError as e:
        check("nothing.here" in str(e), str(e))
    else:
        raise SystemExit("a name the folder lacks loaded")
    adapter_round_trip(gen, scratch, tree, mesh_a, mesh_b)
    print("0 mismatches")


if __name__ == "__main__":
    main()
