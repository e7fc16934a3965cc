"""Checkpoints written as Levanter writes them, with JAX's own serializer
(``jax.experimental.array_serialization``: PyPI's levanter is too old to
install beside this JAX), from one process, to a local folder or a store.

- "ocdbt": Levanter's current layout (``tensorstore_serialization.py``):
  every leaf a zarr3 array in one OCDBT database rooted at the step folder,
  under its dotted tree path with '/', written by
  ``GlobalAsyncCheckpointManager.serialize``.
- "zarr": its previous layout: a zarr (v2) folder per leaf at
  ``<step>/model/transformer/.../weight`` (JAX's ``get_tensorstore_spec``, as
  ``serialize_with_paths`` builds it).

Both end with ``metadata.json`` (step, timestamp), written once the arrays are
committed. The states are a small Llama's in Levanter's names (the
``levanter-llama`` map's), with optimizer state, step and training key; a LoRA
run's (only the LoRA factors are saved); and one nested under
``train_state``.
"""

from __future__ import annotations

import datetime
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.array_serialization import serialization as jser
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

LAYOUTS = ("ocdbt", "zarr")
STATES = ("full", "lora", "nested")
# A small Llama: 2 layers, embed 16, 4 heads in 2 KV groups of head_dim 4, MLP 24, vocab 32, LoRA rank 2.
L, E, KV, QPG, HD, MLP, V, R = 2, 16, 2, 2, 4, 24, 32, 2
HF_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": E,
             "intermediate_size": MLP, "num_attention_heads": KV * QPG, "num_key_value_heads": KV,
             "head_dim": HD, "num_hidden_layers": L, "vocab_size": V, "rms_norm_eps": 1e-5}
LORA_CONFIG = {"peft_type": "LORA", "r": R, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"],
               "task_type": "CAUSAL_LM", "base_model_name_or_path": "base"}
_STACK = "transformer.layers.stacked"


def model_shapes() -> dict[str, tuple[int, ...]]:
    """The base model's tensors in Levanter's names and shapes (the levanter-llama map's)."""
    return {
        "embeddings.token_embeddings.weight": (V, E),
        f"{_STACK}.self_attn.q_proj.weight": (L, KV, QPG, HD, E),
        f"{_STACK}.self_attn.k_proj.weight": (L, KV, HD, E),
        f"{_STACK}.self_attn.v_proj.weight": (L, KV, HD, E),
        f"{_STACK}.self_attn.o_proj.weight": (L, E, KV * QPG, HD),
        f"{_STACK}.mlp.gate_proj.weight": (L, MLP, E),
        f"{_STACK}.mlp.up_proj.weight": (L, MLP, E),
        f"{_STACK}.mlp.down_proj.weight": (L, E, MLP),
        f"{_STACK}.input_layernorm.weight": (L, E),
        f"{_STACK}.post_attention_layernorm.weight": (L, E),
        "transformer.norm.weight": (E,),
        "lm_head.weight": (V, E),
    }


def lora_shapes() -> dict[str, tuple[int, ...]]:
    """A LoRA run's trainable leaves: A [layer, r, in...], B [layer, out..., r] on q_proj and v_proj."""
    return {f"{_STACK}.self_attn.q_proj.lora.lora_A.weight": (L, R, E),
            f"{_STACK}.self_attn.q_proj.lora.lora_B.weight": (L, KV, QPG, HD, R),
            f"{_STACK}.self_attn.v_proj.lora.lora_A.weight": (L, R, E),
            f"{_STACK}.self_attn.v_proj.lora.lora_B.weight": (L, KV, HD, R)}


def state_values(kind: str, gen: np.random.Generator) -> dict[str, np.ndarray]:
    """The training state of `kind` as {dotted tree path: value}: model, optimizer state, step, key."""
    def f(shape, dtype=np.float32):
        return gen.standard_normal(shape).astype(dtype)

    shapes = lora_shapes() if kind == "lora" else model_shapes()
    model = {f"model.{n}": f(s) for n, s in shapes.items()}
    first = next(iter(shapes))
    state = {**model,
             f"opt_state.inner_state.0.mu.{first}": f(shapes[first]),
             f"opt_state.inner_state.0.nu.{first}": np.abs(f(shapes[first])),
             "opt_state.inner_state.0.count": np.asarray(gen.integers(0, 99), np.int32),
             "step": np.asarray(gen.integers(1, 9999), np.int32),
             "training_key": gen.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)}
    return {f"train_state.{n}": v for n, v in state.items()} if kind == "nested" else state


def _placed(values: dict[str, np.ndarray]) -> dict[str, jax.Array]:
    """Each value on an 8-device (2, 4) mesh as a training job holds it: the largest dimensions split
    over "data" and "model" where they divide, small leaves replicated."""
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    placed = {}
    for name, v in values.items():
        spec = [None] * v.ndim
        for axis, size in (("model", 4), ("data", 2)):
            for d in sorted(range(v.ndim), key=lambda d: -v.shape[d]):
                if spec[d] is None and v.shape[d] % size == 0 and v.shape[d] > size:
                    spec[d] = axis
                    break
        placed[name] = jax.device_put(jnp.asarray(v), NamedSharding(mesh, P(*spec)))
    return placed


def kvstore_of(url: str) -> dict:
    """The kvstore Levanter builds for a step folder: file, gcs, or s3 with the endpoint and region of
    AWS_ENDPOINT_URL / AWS_REGION and the environment's credentials."""
    m = re.fullmatch(r"(gs|s3)://([^/]+)/(.*)", url)
    if m is None:
        return {"driver": "file", "path": os.path.abspath(url)}
    scheme, bucket, key = m.groups()
    if scheme == "gs":
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")  # TensorStore's own variable names the emulator
        if emulator and not os.environ.get("TENSORSTORE_GCS_HTTP_URL"):
            os.environ["TENSORSTORE_GCS_HTTP_URL"] = emulator if "://" in emulator else f"http://{emulator}"
        return {"driver": "gcs", "bucket": bucket, "path": key}
    spec = {"driver": "s3", "bucket": bucket, "path": key, "aws_credentials": {"type": "environment"}}
    if os.environ.get("AWS_ENDPOINT_URL"):
        spec["endpoint"] = os.environ["AWS_ENDPOINT_URL"]
    if os.environ.get("AWS_REGION"):
        spec["aws_region"] = os.environ["AWS_REGION"]
    return spec


def _spec(step_url: str, name: str, layout: str) -> dict:
    if layout == "ocdbt":  # Levanter's current _tensorstore_spec_for
        return {"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": kvstore_of(step_url.rstrip("/") + "/"),
                                               "path": name.replace(".", "/")}}
    # The previous one: JAX's get_tensorstore_spec of the leaf's folder, zarr v2 in its own folder.
    path = step_url.rstrip("/") + "/" + name.replace(".", "/")
    spec = jser.get_tensorstore_spec(path if "://" in path else os.path.abspath(path), ocdbt=False, driver="zarr")
    spec["kvstore"] = kvstore_of(path)
    return spec


def _write_metadata(step_url: str, step: int) -> None:
    text = json.dumps({"step": step, "timestamp": datetime.datetime.now().isoformat()})
    if "://" not in step_url:
        with open(os.path.join(step_url, "metadata.json"), "w") as f:
            f.write(text)
        return
    import tensorstore as ts

    store = ts.KvStore.open(kvstore_of(step_url.rstrip("/") + "/")).result()
    store.write("metadata.json", text.encode()).result()


def save(step_url: str, values: dict[str, np.ndarray], layout: str, step: int = 1000) -> None:
    """`values` saved at `step_url` (a folder or s3:// / gs:// URL) as Levanter saves a training state."""
    if "://" not in step_url:
        os.makedirs(step_url, exist_ok=True)
    arrays = _placed(values)
    manager = jser.GlobalAsyncCheckpointManager()
    manager.serialize(list(arrays.values()), [_spec(step_url, n, layout) for n in arrays],
                      on_commit_callback=lambda: _write_metadata(step_url, step))
    manager.wait_until_finished()


def hf_reference(model: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """numpy's rearrangement of a model (names without "model.") into Hugging Face's tensors."""
    out = {"model.embed_tokens.weight": model["embeddings.token_embeddings.weight"],
           "model.norm.weight": model["transformer.norm.weight"], "lm_head.weight": model["lm_head.weight"]}
    for layer in range(L):
        for name, value in model.items():
            if not name.startswith(_STACK) or ".lora." in name:
                continue
            module = name[len(_STACK) + 1:]
            w = value[layer]
            if module.startswith("self_attn.o_proj"):
                w = w.reshape(E, -1)
            elif w.ndim > 2:
                w = w.reshape(-1, E)
            out[f"model.layers.{layer}.{module}"] = w
    return out


def adapter_reference(lora: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """numpy's rearrangement of a LoRA run's factors (names without "model.") into PEFT's keys."""
    out = {}
    for name, value in lora.items():
        module, factor = name[len(_STACK) + 1:].split(".lora.")
        for layer in range(L):
            w = value[layer]
            out[f"base_model.model.model.layers.{layer}.{module}.{factor}"] = (
                w if factor.startswith("lora_A") else w.reshape(-1, R))
    return out
