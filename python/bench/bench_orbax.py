"""reshard.orbax figures, each beside Orbax's own way measured in the same run.

  .venv/bin/python python/bench/bench_orbax.py [--layers 12] [--embed 1024] [--vocab 32768] [--repeat 3]

A Levanter-Llama-shaped float32 model (about 1 GiB at the default sizes) on 8
CPU devices in one layout (a 2x4 mesh, one device order) is saved with
Orbax's StandardCheckpointer (OCDBT, zarr, zstd), then:
1. restored onto another layout (a 4x2 mesh in another device order, rows
   split over all 8 devices where the saved layout split rows and columns, so
   each box takes parts of several saved chunks): reshard.orbax.restore (into jax.Arrays, and
   into ShardedArrays) beside StandardCheckpointer.restore onto the same
   shardings;
2. exported to a Hugging Face folder through the levanter-llama map:
   reshard.orbax.export beside Orbax's restore then reshard.jax.export.
The checkpoint's files are read from the page cache after the first run, so
this measures decoding and copying, not the disk. Times are the best of
--repeat; ratios are Orbax's time / reshard's (above 1: reshard is faster).
Small sizes are a quick check (python/tests/test_bench.py runs it so).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import reshard.jax as rjax  # noqa: E402
from timing import best  # noqa: E402
import reshard.orbax as ro  # noqa: E402

ORDER_A, ORDER_B = [0, 4, 1, 5, 2, 6, 3, 7], [7, 6, 5, 4, 3, 2, 1, 0]
KV, QPG, HEAD_DIM = 8, 2, 64


def shapes(layers: int, embed: int, vocab: int) -> dict:
    mlp = 4 * embed
    head_dim = min(HEAD_DIM, embed // (KV * QPG)) or 1
    return {
        "embeddings": {"token_embeddings": {"weight": (vocab, embed)}},
        "transformer": {
            "layers": {"stacked": {
                "self_attn": {"q_proj": {"weight": (layers, KV, QPG, head_dim, embed)},
                              "k_proj": {"weight": (layers, KV, head_dim, embed)},
                              "v_proj": {"weight": (layers, KV, head_dim, embed)},
                              "o_proj": {"weight": (layers, embed, KV * QPG, head_dim)}},
                "mlp": {"gate_proj": {"weight": (layers, mlp, embed)}, "up_proj": {"weight": (layers, mlp, embed)},
                        "down_proj": {"weight": (layers, embed, mlp)}},
                "input_layernorm": {"weight": (layers, embed)},
                "post_attention_layernorm": {"weight": (layers, embed)},
            }},
            "norm": {"weight": (embed,)},
        },
        "lm_head": {"weight": (vocab, embed)},
    }


def spec(shape: tuple, first: str, second: str, m: Mesh) -> P:
    """Split the last dimension over `first` and the one before over `second` where they divide."""
    sizes = dict(m.shape)
    entries = [None] * len(shape)
    if shape and shape[-1] % sizes[first] == 0:
        entries[-1] = first
    if len(shape) > 1 and shape[-2] % sizes[second] == 0:
        entries[-2] = second
    return P(*entries)


def spec_rows(shape: tuple, m: Mesh) -> P:
    """Split the dimension before the last over the whole mesh where it divides (rows, where the
    saved layout split rows and columns), else as `spec`."""
    if len(shape) > 1 and shape[-2] % m.devices.size == 0:
        return P(*([None] * (len(shape) - 2)), ("model", "data"), None)
    return spec(shape, "data", "model", m)


def mesh(order: list[int], grid: tuple[int, int]) -> Mesh:
    by_id = {d.id: d for d in jax.devices()}
    return Mesh(np.array([by_id[d] for d in order], dtype=object).reshape(grid), ("data", "model"))


def is_shape(x) -> bool:
    return isinstance(x, tuple) and all(isinstance(d, int) for d in x)


def gib_s(nbytes: int, seconds: float) -> str:
    return f"{nbytes / 2**30 / seconds:.2f} GiB/s ({seconds * 1e3:.0f} ms)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--embed", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--folder", help="where to write the checkpoint (default: a temporary folder)")
    args = parser.parse_args()
    if len(jax.devices()) < 8:
        raise SystemExit(f"needs 8 JAX devices, XLA_FLAGS gave {len(jax.devices())}")
    tree_shapes = shapes(args.layers, args.embed, args.vocab)
    mesh_a, mesh_b = mesh(ORDER_A, (2, 4)), mesh(ORDER_B, (4, 2))
    layout_a = jax.tree_util.tree_map(lambda s: NamedSharding(mesh_a, spec(s, "model", "data", mesh_a)), tree_shapes,
                                      is_leaf=is_shape)
    layout_b = jax.tree_util.tree_map(lambda s: NamedSharding(mesh_b, spec_rows(s, mesh_b)), tree_shapes,
                                      is_leaf=is_shape)
    gen = np.random.default_rng(0)
    tree = jax.tree_util.tree_map(
        lambda s, sh: jax.device_put(gen.standard_normal(s, np.float32), sh), tree_shapes, layout_a, is_leaf=is_shape)
    nbytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(tree))
    abstract = jax.tree_util.tree_map(lambda x, sh: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh), tree, layout_b)
    with tempfile.TemporaryDirectory(dir=args.folder) as scratch:
        path = pathlib.Path(scratch) / "ckpt"
        with ocp.StandardCheckpointer() as c:
            c.save(path, tree)
        del tree
        checkpointer = ocp.StandardCheckpointer()

        def orbax_restore():
            return jax.block_until_ready(checkpointer.restore(path, abstract))

        def ours_jax():
            return jax.block_until_ready(ro.restore(path, abstract))

        targets = jax.tree_util.tree_map(rjax.to_reshard, layout_b)
        theirs = best(orbax_restore, args.repeat)
        ours = best(ours_jax, args.repeat)
        core = best(lambda: ro.restore(path, targets), args.repeat)
        got, want = ours_jax(), orbax_restore()
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            assert a.sharding == b.sharding and np.array_equal(np.asarray(a), np.asarray(b))
        del got, want
        print(f"restore a {nbytes / 2**20:.0f} MiB Orbax checkpoint (OCDBT, zarr) from a 2x4 mesh onto rows over a "
              "4x2 mesh in another device order:")
        print(f"  Orbax StandardCheckpointer.restore  {gib_s(nbytes, theirs)}")
        print(f"  reshard.orbax.restore (jax.Arrays)  {gib_s(nbytes, ours)}  ratio {theirs / ours:.2f}x")
        print(f"  reshard.orbax.restore (ShardedArrays) {gib_s(nbytes, core)}  ratio {theirs / core:.2f}x")

        outs = iter(range(10**6))

        def export_ours():
            out = pathlib.Path(scratch) / f"hf{next(outs)}"
            ro.export(path, out, "levanter-llama")
            shutil.rmtree(out)

        def export_theirs():
            out = pathlib.Path(scratch) / f"hf{next(outs)}"
            rjax.export(orbax_restore(), out, "levanter-llama")
            shutil.rmtree(out)

        theirs = best(export_theirs, args.repeat)
        ours = best(export_ours, args.repeat)
        print("export it to a Hugging Face folder (levanter-llama), one process:")
        print(f"  Orbax restore + reshard.jax.export  {gib_s(nbytes, theirs)}")
        print(f"  reshard.orbax.export                {gib_s(nbytes, ours)}  ratio {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
