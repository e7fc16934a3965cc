"""Run by test_store_urls.py under ``mpirun -np 2``: a two-process JAX job (4 CPU devices per
process, ``jax.distributed.initialize()``) exports one pytree, sharded over all 8 devices, with
reshard.jax.export to a local folder and to each URL given, every process writing the parts it
holds. argv: the seed, the local folder, then the URLs. Prints "rank R ok" when done."""

from __future__ import annotations

import json
import os
import sys
import traceback

import numpy as np

MAP = json.dumps({"rules": [
    {"from": "stacked.w", "to": "model.layers.{layer}.w", "rearrange": "layer out in -> in out"},
    {"from": "embed", "to": "model.embed.weight"},
]})


def values(seed: int) -> dict[str, np.ndarray]:
    """12 MiB of weights (parts of 5 MiB come from both processes), the same in every process."""
    gen = np.random.default_rng(seed)
    return {"stacked.w": gen.standard_normal((3, 1024, 1024)).astype(np.float32),
            "embed": gen.standard_normal((64, 32)).astype(np.float32)}


def main() -> int:
    seed, local, urls = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import reshard.jax as rjax
    import reshard.mpi

    transport = reshard.mpi.transport()
    try:
        # Rows of the mesh run across the processes, so every output file has bytes of both.
        devices = np.array(jax.devices()).reshape(4, 2).T
        mesh = Mesh(devices, ("data", "model"))
        specs = {"stacked.w": P(None, "model", "data"), "embed": P("data", "model")}
        tree = {}
        for name, value in values(seed).items():
            sharding = NamedSharding(mesh, specs[name])
            tree[name] = jax.make_array_from_callback(value.shape, sharding, lambda index, v=value: v[index])
        for out in [local, *urls]:
            rjax.export(tree, out, MAP, transport=transport, hf_config={"model_type": "test"},
                        max_shard_size="8MiB", part_size="5MiB")
        sys.stdout.write(f"rank {transport.rank} ok\n")
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - reported, then the process fails
        sys.stdout.write(f"rank {transport.rank} FAILED\n{traceback.format_exc()}\n")
        sys.stdout.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
