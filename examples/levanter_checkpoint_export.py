"""A Levanter LoRA run's checkpoint on s3:// exported to Hugging Face by `reshard export`, in miniature.

Three steps, each a 4-process job (the S3 endpoint and keys from AWS_ENDPOINT_URL,
AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; gs:// URLs and local folders
work alike):

  mpirun -np 4 python examples/levanter_checkpoint_export.py save s3://bucket/run/step-1000 --local /tmp/lev
  mpirun -np 4 reshard export s3://bucket/run/step-1000 s3://bucket/adapter --map levanter-llama \\
      --adapter-only --lora-config /tmp/lev/adapter_config.json
  mpirun -np 4 reshard export s3://bucket/run/step-1000 s3://bucket/merged --map levanter-llama \\
      --merge-lora --base /tmp/lev/base --lora-config /tmp/lev/adapter_config.json
  mpirun -np 4 python examples/levanter_checkpoint_export.py check s3://bucket --local /tmp/lev

save: a JAX job (jax.distributed, 4 CPU devices per process in a TPU's device
order) holds a small Llama's LoRA training state (only the factors, as a LoRA
run saves it, with opt_state, step and training_key) sharded over all 16
devices, and saves it as Levanter does: JAX's GlobalAsyncCheckpointManager, every
leaf a zarr3 array in one OCDBT database at the step folder, metadata.json last.
Process 0 also writes the base model (LOCAL/base, a Hugging Face folder) and the
adapter config.

check: every process reads the exported objects back, compares the adapter with
numpy's rearrangement of the saved factors byte for byte and the merged model with
numpy's W + (alpha / r) B A, then loads the merged model onto another mesh
("data"=2, "model"=8) with reshard.jax.load_pretrained (from LOCAL/merged, the objects'
copy: import from stores has not landed) and checks every shard. Prints "rank R ok".
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorstore as ts  # noqa: E402
from jax.experimental.array_serialization import serialization as jser  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

TPU_ORDER = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]
LAYERS, EMBED, KV, QPG, HD, MLP, VOCAB, R, ALPHA = 2, 64, 4, 2, 8, 128, 256, 4, 8
STACK = "transformer.layers.stacked"
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": EMBED,
             "intermediate_size": MLP, "num_hidden_layers": LAYERS, "num_attention_heads": KV * QPG,
             "num_key_value_heads": KV, "head_dim": HD, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
             "torch_dtype": "float32", "tie_word_embeddings": False}
LORA_CONFIG = {"peft_type": "LORA", "r": R, "lora_alpha": ALPHA, "target_modules": ["q_proj", "v_proj"],
               "task_type": "CAUSAL_LM", "base_model_name_or_path": "base"}


def base_model(gen: np.random.Generator) -> dict[str, np.ndarray]:
    shapes = {"embeddings.token_embeddings.weight": (VOCAB, EMBED), "lm_head.weight": (VOCAB, EMBED),
              f"{STACK}.self_attn.q_proj.weight": (LAYERS, KV, QPG, HD, EMBED),
              f"{STACK}.self_attn.k_proj.weight": (LAYERS, KV, HD, EMBED),
              f"{STACK}.self_attn.v_proj.weight": (LAYERS, KV, HD, EMBED),
              f"{STACK}.self_attn.o_proj.weight": (LAYERS, EMBED, KV * QPG, HD),
              f"{STACK}.mlp.gate_proj.weight": (LAYERS, MLP, EMBED), f"{STACK}.mlp.up_proj.weight": (LAYERS, MLP, EMBED),
              f"{STACK}.mlp.down_proj.weight": (LAYERS, EMBED, MLP),
              f"{STACK}.input_layernorm.weight": (LAYERS, EMBED),
              f"{STACK}.post_attention_layernorm.weight": (LAYERS, EMBED), "transformer.norm.weight": (EMBED,)}
    return {n: gen.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def lora_state(gen: np.random.Generator) -> dict[str, np.ndarray]:
    """The LoRA run's saved state by tree path: the factors under model, opt_state, step, training_key."""
    model = {f"{STACK}.self_attn.q_proj.lora.lora_A.weight": (LAYERS, R, EMBED),
             f"{STACK}.self_attn.q_proj.lora.lora_B.weight": (LAYERS, KV, QPG, HD, R),
             f"{STACK}.self_attn.v_proj.lora.lora_A.weight": (LAYERS, R, EMBED),
             f"{STACK}.self_attn.v_proj.lora.lora_B.weight": (LAYERS, KV, HD, R)}
    state = {f"model.{n}": gen.standard_normal(s).astype(np.float32) for n, s in model.items()}
    state.update({f"opt_state.inner_state.0.mu.{n}": np.zeros(s, np.float32) for n, s in model.items()})
    state["step"] = np.asarray(1000, np.int32)
    state["training_key"] = np.asarray([0, 42], np.uint32)
    return state


def values(seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    gen = np.random.default_rng(seed)
    return base_model(gen), lora_state(gen)


def kvstore(url: str) -> dict:
    """The kvstore Levanter builds for a folder: s3:// (endpoint and region from the environment),
    gs:// (STORAGE_EMULATOR_HOST for an emulator), or a local path."""
    m = re.fullmatch(r"(s3|gs)://([^/]+)/?(.*)", url)
    if m is None:
        return {"driver": "file", "path": os.path.abspath(url) + "/"}
    scheme, bucket, key = m.groups()
    path = key.rstrip("/") + "/" if key else ""
    if scheme == "gs":
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator and not os.environ.get("TENSORSTORE_GCS_HTTP_URL"):
            os.environ["TENSORSTORE_GCS_HTTP_URL"] = emulator if "://" in emulator else f"http://{emulator}"
        return {"driver": "gcs", "bucket": bucket, "path": path}
    spec = {"driver": "s3", "bucket": bucket, "path": path, "aws_credentials": {"type": "environment"},
            "aws_region": os.environ.get("AWS_REGION", "us-east-1")}
    if os.environ.get("AWS_ENDPOINT_URL"):
        spec["endpoint"] = os.environ["AWS_ENDPOINT_URL"]
    return spec


def save(step_url: str, local: pathlib.Path, seed: int, layout: str) -> None:
    import reshard

    base, state = values(seed)
    mesh = Mesh(np.array([jax.devices()[i] for i in TPU_ORDER]).reshape(4, 4), ("data", "model"))
    arrays, specs = [], []
    for name, value in state.items():
        spec = [None] * value.ndim  # the largest dimension the model axis divides, over it
        dims = [d for d in range(value.ndim) if value.shape[d] % 4 == 0 and value.shape[d] > 4]
        if dims:
            spec[max(dims, key=lambda d: value.shape[d])] = "model"
        sharding = NamedSharding(mesh, P(*spec))
        arrays.append(jax.make_array_from_callback(value.shape, sharding, lambda i, v=value: v[i]))
        if layout == "ocdbt":  # Levanter's current layout: one OCDBT database at the step folder
            specs.append({"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": kvstore(step_url),
                                                         "path": name.replace(".", "/")}})
        else:  # its previous one: a zarr folder per leaf
            leaf = kvstore(step_url)
            leaf["path"] += name.replace(".", "/") + "/"
            specs.append({"driver": "zarr", "kvstore": leaf})

    def commit() -> None:
        if jax.process_index() == 0:
            metadata = {"step": 1000, "timestamp": datetime.datetime.now().isoformat()}
            ts.KvStore.open(kvstore(step_url)).result().write("metadata.json", json.dumps(metadata)).result()

    manager = jser.GlobalAsyncCheckpointManager()
    manager.serialize(arrays, specs, on_commit_callback=commit)
    manager.wait_until_finished()
    if jax.process_index() == 0:
        one = reshard.NamedSharding(reshard.Mesh([0], ("d",)), reshard.P())
        reshard.export({n: reshard.from_host(v, one) for n, v in base.items()}, local / "base", "levanter-llama",
                       hf_config=HF_CONFIG, replace=True)
        (local / "adapter_config.json").write_text(json.dumps(LORA_CONFIG))


def objects(url: str) -> dict[str, bytes]:
    store = ts.KvStore.open(kvstore(url)).result()
    return {k.decode(): bytes(store.read(k).result().value) for k in store.list().result()}


def hf_reference(base: dict[str, np.ndarray], lora: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """numpy's adapter (PEFT keys) and merged model (W + alpha / r B A)."""
    adapter, merged = {}, {}
    for layer in range(LAYERS):
        for module in ("q_proj", "v_proj"):
            a = lora[f"model.{STACK}.self_attn.{module}.lora.lora_A.weight"][layer]
            b = lora[f"model.{STACK}.self_attn.{module}.lora.lora_B.weight"][layer].reshape(-1, R)
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            adapter[f"{prefix}.lora_A.weight"], adapter[f"{prefix}.lora_B.weight"] = a, b
            w = base[f"{STACK}.self_attn.{module}.weight"][layer].reshape(-1, EMBED)
            merged[f"model.layers.{layer}.self_attn.{module}.weight"] = w + (ALPHA / R) * (b @ a)
    return adapter, merged


def check(root: str, local: pathlib.Path, seed: int, transport) -> None:
    import safetensors.numpy

    import reshard.jax as rjax

    base, lora = values(seed)
    want_adapter, want_merged = hf_reference(base, lora)
    got = objects(f"{root}/adapter")
    adapter = safetensors.numpy.load(got["adapter_model.safetensors"])
    assert sorted(adapter) == sorted(want_adapter), sorted(adapter)
    assert all(adapter[n].tobytes() == want_adapter[n].tobytes() for n in adapter), "adapter bytes"
    merged_files = objects(f"{root}/merged")
    if transport.rank == 0:
        (local / "merged").mkdir(parents=True, exist_ok=True)
        for name, data in merged_files.items():
            (local / "merged" / name).write_bytes(data)
    transport.barrier()
    other = Mesh(np.array(jax.devices()).reshape(2, 8), ("data", "model"))
    loaded = rjax.load_pretrained(local / "merged", "levanter-llama", mesh=other, best_effort="model",
                                  transport=transport)
    flat = {".".join(str(getattr(k, "key", k)) for k in path): x
            for path, x in jax.tree_util.tree_flatten_with_path(loaded)[0]}
    for name, x in flat.items():
        want = lora.get(name) if ".lora." in name else base[name]
        if name.endswith(("q_proj.weight", "v_proj.weight")):
            module = name.split(".")[-2]
            want = np.stack([want_merged[f"model.layers.{layer}.self_attn.{module}.weight"].reshape(want.shape[1:])
                             for layer in range(LAYERS)])
            for shard in x.addressable_shards:
                np.testing.assert_allclose(np.asarray(shard.data), want[shard.index], rtol=1e-5, atol=1e-5,
                                           err_msg=name)
            continue
        for shard in x.addressable_shards:
            assert np.asarray(shard.data).tobytes() == want[shard.index].tobytes(), name
    assert len(flat) == len(base), sorted(flat)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["save", "check"])
    parser.add_argument("url", help="save: the step folder (s3://, gs:// or local); check: the folder holding "
                                    "adapter and merged")
    parser.add_argument("--local", type=pathlib.Path, required=True, help="a local folder for the base and configs")
    parser.add_argument("--layout", choices=["ocdbt", "zarr"], default="ocdbt",
                        help="save: Levanter's current layout (one OCDBT database) or its previous one (zarr folders)")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("RESHARD_SEED", "0")))
    args = parser.parse_args()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize()
    import reshard.mpi

    transport = reshard.mpi.transport()
    print(f"RESHARD_SEED={args.seed}", flush=True) if transport.rank == 0 else None
    try:
        if args.step == "save":
            save(args.url, args.local, args.seed, args.layout)
        else:
            check(args.url.rstrip("/"), args.local, args.seed, transport)
    except Exception:  # noqa: BLE001 - reported, then the process fails
        import traceback

        sys.stdout.write(f"rank {transport.rank} FAILED\n{traceback.format_exc()}\n")
        sys.stdout.flush()
        return 1
    sys.stdout.write(f"rank {transport.rank} ok\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
