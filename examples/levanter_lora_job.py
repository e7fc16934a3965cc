"""A Levanter-style LoRA job in miniature, with reshard.jax inside one JAX job.

Run as 4 processes of one JAX job (4 CPU devices each, 16 in all):

  mpirun -np 4 python examples/levanter_lora_job.py --out /tmp/lora

or as one process holding the same 16 devices (the same program, no transport):

  python examples/levanter_lora_job.py --out /tmp/lora

A small Llama with LoRA adapters on q_proj and v_proj, a pytree of jax.Arrays in
the `levanter-llama` layout (layers stacked on a leading axis, attention weights
with head axes), is made by a jit on a ("data"=4, "model"=4) mesh in a TPU's
device order (0, 4, 8, 12, 1, 5, ...: each row of the mesh spans every process).
The job then:
  a. runs a jit on the mesh of the same shape in the natural order, and prints JAX's
     refusal of arrays committed to the other order;
  b. prints what reshard.jax.check finds (the arrays, the bytes per process to fix
     them), moves them with reshard.jax.device_put and runs the jit;
  c. exports the PEFT adapter (DIR/adapter) and the merged model (DIR/merged) from
     all processes at once, each writing what its own devices hold;
  d. loads the merged model onto a ("data"=2, "model"=8) mesh with
     reshard.jax.load_pretrained and checks every byte of it against the exported
     files (and the merge against numpy's W + (alpha / r) B A);
  e. prints a summary on process 0.
The folders are the same, byte for byte, whichever way it runs
(python/tests/test_example.py checks that).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import reshard.mpi  # before JAX: it says whether mpirun started this process

DEVICES_PER_PROCESS, PROCESSES = 4, 4
TPU_ORDER = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]

# The model: Llama with grouped-query attention, tiny.
LAYERS, EMBED, KV_HEADS, Q_PER_GROUP, HEAD_DIM, MLP, VOCAB, RANK, ALPHA = 2, 64, 4, 2, 8, 128, 256, 4, 8
HEADS = KV_HEADS * Q_PER_GROUP
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": EMBED,
             "intermediate_size": MLP, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
             "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
             "torch_dtype": "float32", "tie_word_embeddings": False}
LORA_CONFIG = {"peft_type": "LORA", "r": RANK, "lora_alpha": ALPHA, "lora_dropout": 0.0,
               "target_modules": ["q_proj", "v_proj"], "bias": "none", "task_type": "CAUSAL_LM"}
STACKED = "transformer.layers.stacked"

# XLA reads its device count once, at its first use: 4 per process under mpirun (one
# JAX job over jax.distributed), else all 16 in this process.
UNDER_MPI = reshard.mpi.launched_by_mpi()
DEVICES_HERE = DEVICES_PER_PROCESS if UNDER_MPI else DEVICES_PER_PROCESS * PROCESSES
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES_HERE}"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import reshard.jax as rjax  # noqa: E402


def specs() -> dict[str, object]:
    """Levanter's layout on ("data", "model"): the embedding axis over data (FSDP),
    heads and the MLP over model; the norms replicated."""
    return {
        "embeddings.token_embeddings.weight": P("model", "data"),
        f"{STACKED}.self_attn.q_proj.weight": P(None, "model", None, None, "data"),
        f"{STACKED}.self_attn.q_proj.lora.lora_A.weight": P(None, None, "data"),
        f"{STACKED}.self_attn.q_proj.lora.lora_B.weight": P(None, "model"),
        f"{STACKED}.self_attn.k_proj.weight": P(None, "model", None, "data"),
        f"{STACKED}.self_attn.v_proj.weight": P(None, "model", None, "data"),
        f"{STACKED}.self_attn.v_proj.lora.lora_A.weight": P(None, None, "data"),
        f"{STACKED}.self_attn.v_proj.lora.lora_B.weight": P(None, "model"),
        f"{STACKED}.self_attn.o_proj.weight": P(None, "data", "model"),
        f"{STACKED}.mlp.gate_proj.weight": P(None, "model", "data"),
        f"{STACKED}.mlp.up_proj.weight": P(None, "model", "data"),
        f"{STACKED}.mlp.down_proj.weight": P(None, "data", "model"),
        f"{STACKED}.input_layernorm.weight": P(),
        f"{STACKED}.post_attention_layernorm.weight": P(),
        "transformer.norm.weight": P(),
        "lm_head.weight": P("model", "data"),
    }


def shapes() -> dict[str, tuple[int, ...]]:
    """The levanter-llama preset's framework shapes (docs/tensor-map.md)."""
    return {
        "embeddings.token_embeddings.weight": (VOCAB, EMBED),
        f"{STACKED}.self_attn.q_proj.weight": (LAYERS, KV_HEADS, Q_PER_GROUP, HEAD_DIM, EMBED),
        f"{STACKED}.self_attn.q_proj.lora.lora_A.weight": (LAYERS, RANK, EMBED),
        f"{STACKED}.self_attn.q_proj.lora.lora_B.weight": (LAYERS, KV_HEADS, Q_PER_GROUP, HEAD_DIM, RANK),
        f"{STACKED}.self_attn.k_proj.weight": (LAYERS, KV_HEADS, HEAD_DIM, EMBED),
        f"{STACKED}.self_attn.v_proj.weight": (LAYERS, KV_HEADS, HEAD_DIM, EMBED),
        f"{STACKED}.self_attn.v_proj.lora.lora_A.weight": (LAYERS, RANK, EMBED),
        f"{STACKED}.self_attn.v_proj.lora.lora_B.weight": (LAYERS, KV_HEADS, HEAD_DIM, RANK),
        f"{STACKED}.self_attn.o_proj.weight": (LAYERS, EMBED, HEADS, HEAD_DIM),
        f"{STACKED}.mlp.gate_proj.weight": (LAYERS, MLP, EMBED),
        f"{STACKED}.mlp.up_proj.weight": (LAYERS, MLP, EMBED),
        f"{STACKED}.mlp.down_proj.weight": (LAYERS, EMBED, MLP),
        f"{STACKED}.input_layernorm.weight": (LAYERS, EMBED),
        f"{STACKED}.post_attention_layernorm.weight": (LAYERS, EMBED),
        "transformer.norm.weight": (EMBED,),
        "lm_head.weight": (VOCAB, EMBED),
    }


def nest(flat: dict[str, object]) -> dict:
    """{"a.b": x} as {"a": {"b": x}}: reshard.jax names a leaf by its keys joined by dots."""
    tree: dict = {}
    for name, value in flat.items():
        *parents, last = name.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def mesh(order: list[int], shape: tuple[int, int]) -> Mesh:
    devices = jax.devices()
    return Mesh(np.array([devices[i] for i in order], dtype=object).reshape(shape), ("data", "model"))


def init_params(tpu_mesh: Mesh) -> dict:
    """The model as Levanter makes it: one jit whose out_shardings lay every array
    out on the TPU-order mesh. LoRA's B starts small, not zero, so the merge shows."""
    names = sorted(shapes())
    out_shardings = nest({n: NamedSharding(tpu_mesh, s) for n, s in specs().items()})

    def uniform(i, shape, seed):
        """Uniform in [-1, 1) from a hash of each element's index (murmur3's finaliser):
        the same values whatever the sharding, and a kernel that compiles in a blink
        (jax.random's threefry takes XLA seconds per array on a small machine)."""
        h = jax.lax.iota(jnp.uint32, int(np.prod(shape))).reshape(shape) * jnp.uint32(0x9E3779B1)
        h = h + seed * jnp.uint32(0x85EBCA6B) + jnp.uint32(i)
        for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
            h = (h ^ (h >> shift)) * jnp.uint32(factor)
        h = h ^ (h >> 16)
        return (h >> 8).astype(jnp.float32) * (2.0 / (1 << 24)) - 1.0

    def init(seed):
        leaves = {}
        for i, n in enumerate(names):
            if "layernorm" in n or n == "transformer.norm.weight":
                leaves[n] = jnp.ones(shapes()[n], jnp.float32)
            else:
                leaves[n] = (0.01 if n.endswith("lora_B.weight") else 0.02) * uniform(i, shapes()[n], seed)
        return nest(leaves)

    return jax.jit(init, out_shardings=out_shardings)(jnp.uint32(17))


def train_step(params: dict) -> dict:
    """A stand-in for a LoRA step on the natural-order mesh: only the adapters change."""
    def update(path, x):
        name = ".".join(k.key for k in path)
        return x * 1.5 + 0.001 if ".lora." in name else x

    return jax.tree_util.tree_map_with_path(update, params)


def show_refusal(params: dict, natural: dict) -> str:
    """a. jit on the natural-order mesh refuses the arrays committed to the TPU order."""
    try:
        jax.jit(train_step, out_shardings=natural)(params)
    except ValueError as e:
        return str(e).splitlines()[0]
    raise SystemExit("jit ran on arrays committed to another device order: this JAX no longer refuses")


def fix_with_check(params: dict, natural_mesh: Mesh, transport, say) -> tuple[dict, list]:
    """b. check names the arrays jit refuses and what fixing each costs; device_put fixes them."""
    found = rjax.check(params, natural_mesh)
    say(f"reshard.jax.check: {len(found)} of {len(flatten(params))} arrays are incompatible with the natural mesh")
    for record in found:
        say(f"  {record}")
    per_process = [sum(r.bytes_per_process[p] for r in found) for p in range(jax.process_count())]
    say(f"  in all: {per_process} bytes onto each process's devices, "
        f"{sum(r.bytes_cross_process for r in found)} bytes between processes")
    targets = {r.path: r.target for r in found}
    shardings = jax.tree_util.tree_map_with_path(lambda path, x: targets.get(".".join(k.key for k in path),
                                                                             x.sharding), params)
    return rjax.device_put(params, shardings, transport=transport), found


def export_both(params: dict, out: pathlib.Path, transport) -> tuple[object, object]:
    """c. The PEFT adapter and the merged model, written by every process at once."""
    adapter = rjax.export(params, out / "adapter", "levanter-llama", kind="adapter",
                          lora_config=json.dumps(LORA_CONFIG), replace=True, transport=transport)
    merged = rjax.export(params, out / "merged", "levanter-llama", kind="merged", hf_config=json.dumps(HF_CONFIG),
                         lora_config=json.dumps(LORA_CONFIG), replace=True, transport=transport)
    return adapter, merged


def framework_from_hf(hf: dict) -> dict:
    """The Hugging Face tensors in the framework's layout, as numpy computes it: the map
    run backwards (stack the layers, split the heads)."""
    def stack(suffix, shape):
        return np.stack([hf[f"model.layers.{i}.{suffix}"].reshape(shape) for i in range(LAYERS)])

    attn = {"q_proj": (KV_HEADS, Q_PER_GROUP, HEAD_DIM, EMBED), "k_proj": (KV_HEADS, HEAD_DIM, EMBED),
            "v_proj": (KV_HEADS, HEAD_DIM, EMBED), "o_proj": (EMBED, HEADS, HEAD_DIM)}
    out = {"embeddings.token_embeddings.weight": hf["model.embed_tokens.weight"],
           "transformer.norm.weight": hf["model.norm.weight"], "lm_head.weight": hf["lm_head.weight"]}
    for module, shape in attn.items():
        out[f"{STACKED}.self_attn.{module}.weight"] = stack(f"self_attn.{module}.weight", shape)
    for module in ("gate_proj", "up_proj", "down_proj"):
        out[f"{STACKED}.mlp.{module}.weight"] = stack(f"mlp.{module}.weight", (EMBED, MLP) if module == "down_proj"
                                                      else (MLP, EMBED))
    for norm in ("input_layernorm", "post_attention_layernorm"):
        out[f"{STACKED}.{norm}.weight"] = stack(f"{norm}.weight", (EMBED,))
    return out


def load_and_verify(out: pathlib.Path, trained_host: dict, transport) -> tuple[dict, int]:
    """d. The merged model onto a (2, 8) mesh in the natural order; every byte each process
    holds checked against the exported files, and the merge against numpy's."""
    other = mesh(list(range(16)), (2, 8))
    loaded = flatten(rjax.load_pretrained(out / "merged", "levanter-llama", mesh=other, best_effort="model",
                                          transport=transport))
    hf: dict = {}
    for f in sorted((out / "merged").glob("*.safetensors")):
        hf.update(safetensors.numpy.load_file(str(f)))
    expected = framework_from_hf(hf)
    if sorted(loaded) != sorted(expected):
        raise SystemExit(f"loaded {sorted(loaded)}, the export holds {sorted(expected)}")
    checked = 0
    for name, x in loaded.items():
        if x.sharding.mesh != other:
            raise SystemExit(f"{name}: loaded onto {x.sharding}, not the (2, 8) mesh")
        for shard in x.addressable_shards:
            if np.asarray(shard.data).tobytes() != expected[name][shard.index].tobytes():
                raise SystemExit(f"{name}: the shard on device {shard.device.id} differs from the exported bytes")
            checked += shard.data.nbytes
    for module in ("q_proj", "v_proj"):
        w = trained_host[f"{STACKED}.self_attn.{module}.weight"]
        a = trained_host[f"{STACKED}.self_attn.{module}.lora.lora_A.weight"]
        b = trained_host[f"{STACKED}.self_attn.{module}.lora.lora_B.weight"]
        delta = np.einsum("l...r,lre->l...e", b, a) * (ALPHA / RANK)
        if not np.allclose(expected[f"{STACKED}.self_attn.{module}.weight"], w + delta, rtol=1e-5, atol=1e-6):
            raise SystemExit(f"{module}: the merged weight is not W + (alpha / r) B A")
    return loaded, checked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, required=True, help="folder for adapter/ and merged/")
    args = parser.parse_args()
    transport = None
    if UNDER_MPI:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize()  # finds Open MPI's processes by itself
        transport = reshard.mpi.transport()  # reshard's bytes travel here, not through JAX
    process = jax.process_index()

    def say(line: str) -> None:
        if process == 0:
            print(line, flush=True)

    if len(jax.devices()) != DEVICES_PER_PROCESS * PROCESSES:
        raise SystemExit(f"this example needs 16 devices; JAX has {len(jax.devices())}")
    say(f"{jax.process_count()} process(es), JAX device ids {[d.id for d in jax.devices()]}")
    tpu_mesh, natural_mesh = mesh(TPU_ORDER, (4, 4)), mesh(list(range(16)), (4, 4))
    params = init_params(tpu_mesh)
    natural = jax.tree_util.tree_map(lambda x: NamedSharding(natural_mesh, x.sharding.spec), params)

    say(f"a. jit on the natural-order mesh: JAX says: {show_refusal(params, natural)}")
    say("b. the fix")
    fixed, found = fix_with_check(params, natural_mesh, transport, say)
    trained = jax.block_until_ready(jax.jit(train_step, out_shardings=natural)(fixed))
    say("   jit on the natural-order mesh ran on the moved arrays")

    adapter, merged = export_both(trained, args.out, transport)
    say(f"c. exported {adapter.tensors} adapter factors to {args.out / 'adapter'}, "
        f"{merged.tensors} tensors ({merged.merged} merged with their LoRA delta) to {args.out / 'merged'}")

    trained_host = flatten(rjax.to_host(trained, transport=transport))
    loaded, checked = load_and_verify(args.out, trained_host, transport)
    say(f"d. load_pretrained put the merged model on a (data=2, model=8) mesh: {len(loaded)} arrays, "
        f"{checked} bytes on process 0's devices equal to the exported files")
    say(f"e. summary: {jax.process_count()} process(es), {len(found)} arrays fixed by reshard.jax.device_put, "
        f"adapter {sorted(p.name for p in (args.out / 'adapter').iterdir())}, "
        f"merged {sorted(p.name for p in (args.out / 'merged').iterdir())}")
    if transport is not None:
        transport.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
