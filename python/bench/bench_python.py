"""Python front end figures, each beside its baseline measured in the same run.

  .venv/bin/python python/bench/bench_python.py [--mib 256] [--repeat 3]

1. Reading every tensor of a safetensors file: reshard (pread copies, and mmap
   views) beside safetensors.numpy.load_file.
2. Resharding a float32 array between two 8-device meshes in different device
   orders: reshard.reshard beside jax.device_put (both on the CPU devices).
3. Python call overhead: NamedSharding.devices_indices_map beside JAX's.
Times are the best of --repeat runs; ratios are what to compare.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
from jax.sharding import Mesh as JaxMesh, NamedSharding as JaxSharding, PartitionSpec as JaxP  # noqa: E402

import reshard  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_read(mib: int, repeat: int) -> None:
    tensors = {f"layer{i}.w": np.random.default_rng(i).standard_normal((mib * 1024 * 1024 // 4 // 16,), np.float32)
               for i in range(16)}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.safetensors")
        reshard.safetensors.save_file(tensors, path)
        reference = best(lambda: safetensors.numpy.load_file(path), repeat)
        pread = best(lambda: reshard.safetensors.load_file(path, mode="pread"), repeat)
        views = best(lambda: reshard.safetensors.load_file(path), repeat)
        touched = best(lambda: [a.sum() for a in reshard.safetensors.load_file(path).values()], repeat)
    gib_s = lambda t: mib / 1024 / t  # noqa: E731
    print(f"read {mib} MiB, 16 tensors: safetensors.numpy.load_file {gib_s(reference):.2f} GiB/s")
    print(f"  reshard pread (copies)       {gib_s(pread):.2f} GiB/s  ratio {reference / pread:.2f}x")
    print(f"  reshard mmap (views)         {views * 1e3:.3f} ms      ratio {reference / views:.0f}x (no bytes read)")
    print(f"  reshard mmap + sum of each   {gib_s(touched):.2f} GiB/s  ratio {reference / touched:.2f}x")


def bench_reshard(mib: int, repeat: int) -> None:
    devices = jax.devices()
    order_a, order_b = [0, 4, 1, 5, 2, 6, 3, 7], list(range(8))
    shape = (mib * 1024 * 1024 // 4 // 1024, 1024)
    values = np.random.default_rng(0).standard_normal(shape, np.float32)
    jax_a = JaxSharding(JaxMesh(np.array([devices[d] for d in order_a]).reshape(2, 4), ("x", "y")), JaxP("x", "y"))
    jax_b = JaxSharding(JaxMesh(np.array([devices[d] for d in order_b]).reshape(2, 4), ("x", "y")), JaxP("x", "y"))
    ours_a = reshard.NamedSharding(reshard.Mesh(np.array(order_a).reshape(2, 4), ("x", "y")), reshard.P("x", "y"))
    ours_b = reshard.NamedSharding(reshard.Mesh(np.array(order_b).reshape(2, 4), ("x", "y")), reshard.P("x", "y"))
    on_jax = jax.device_put(values, jax_a)
    on_ours = reshard.from_host(values, ours_a)
    theirs = best(lambda: jax.block_until_ready(jax.device_put(on_jax, jax_b)), repeat)
    ours = best(lambda: reshard.reshard(on_ours, ours_b), repeat)
    print(f"reshard {mib} MiB f32 between 2x4 meshes in two device orders:")
    print(f"  jax.device_put {mib / 1024 / theirs:.2f} GiB/s, reshard.reshard {mib / 1024 / ours:.2f} GiB/s"
          f"  ratio {theirs / ours:.2f}x")


def bench_overhead(repeat: int) -> None:
    devices = jax.devices()
    theirs_s = JaxSharding(JaxMesh(np.array(devices).reshape(2, 4), ("x", "y")), JaxP("x"))
    ours_s = reshard.NamedSharding(reshard.Mesh(np.arange(8).reshape(2, 4), ("x", "y")), reshard.P("x"))
    n = 2000

    runs = iter(range(1, 2 * repeat + 1))

    def loop(s):
        # A shape never asked before in every call, so JAX's cache does not answer.
        base = next(runs) * 2 * n
        for i in range(n):
            s.devices_indices_map((base + 2 * i, 4))

    theirs = best(lambda: loop(theirs_s), repeat) / n
    ours = best(lambda: loop(ours_s), repeat) / n
    print(f"devices_indices_map on 8 devices: JAX {theirs * 1e6:.1f} us, reshard {ours * 1e6:.1f} us per call"
          f"  ratio {theirs / ours:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bench_read(args.mib, args.repeat)
    bench_reshard(args.mib, args.repeat)
    bench_overhead(args.repeat)


if __name__ == "__main__":
    main()
