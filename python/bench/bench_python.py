"""Python front end figures, each beside its baseline measured in the same run.

  .venv/bin/python python/bench/bench_python.py [--read-mib 1024] [--put-mib 256] [--repeat 3] [--calls 2000]

1. Reading every tensor of a safetensors file (1 GiB by default): reshard
   (pread copies, and mmap views) beside safetensors.numpy.load_file.
2. Resharding a float32 array (256 MiB by default) between two 8-device meshes
   in different device orders: reshard.jax.device_put (jax.Array to jax.Array)
   and reshard.reshard (ShardedArray to ShardedArray) beside jax.device_put,
   all on the CPU devices.
3. Python call overhead on a small array: reshard.jax.device_put and
   reshard.reshard of a 64-element array beside jax.device_put, and
   NamedSharding.devices_indices_map beside JAX's.
Under mpirun it is one multi-process JAX job instead (4 CPU devices per process;
bench_job.py says what it measures, and how):

  mpirun -np 4 .venv/bin/python python/bench/bench_python.py [--put-mib 256] [--ckpt-mib 256]

Times are the best of --repeat runs; ratios (baseline time / reshard time, so
above 1 means reshard is faster) are what to compare on a loaded machine.
The smaller sizes are for a quick check (python/tests/test_bench.py runs it so).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import reshard.mpi  # before JAX: it says whether mpirun started this process

# Under mpirun: one JAX job over jax.distributed, 4 devices per process.
UNDER_MPI = reshard.mpi.launched_by_mpi()
if UNDER_MPI:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
from jax.sharding import Mesh as JaxMesh, NamedSharding as JaxSharding, PartitionSpec as JaxP  # noqa: E402

import reshard  # noqa: E402
import reshard.jax  # noqa: E402
from timing import best  # noqa: E402

ORDER_A, ORDER_B = [0, 4, 1, 5, 2, 6, 3, 7], list(range(8))


def gib_s(mib: float, seconds: float) -> str:
    return f"{mib / 1024 / seconds:.2f} GiB/s"


def bench_read(mib: int, repeat: int) -> None:
    count = 16
    gen = np.random.default_rng(0)
    tensors = {f"layer{i}.w": gen.random((mib * 1024 * 1024 // 4 // count,), np.float32) for i in range(count)}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.safetensors")
        reshard.safetensors.save_file(tensors, path)
        del tensors
        reference = best(lambda: safetensors.numpy.load_file(path), repeat)
        pread = best(lambda: reshard.safetensors.load_file(path, mode="pread"), repeat)
        views = best(lambda: reshard.safetensors.load_file(path), repeat)
        touched = best(lambda: [a.sum() for a in reshard.safetensors.load_file(path).values()], repeat)
    print(f"read every tensor of a {mib} MiB file ({count} tensors): safetensors.numpy.load_file "
          f"{gib_s(mib, reference)}")
    print(f"  reshard pread (copies)       {gib_s(mib, pread)}  ratio {reference / pread:.2f}x")
    print(f"  reshard mmap (views)         {views * 1e3:.3f} ms      ratio {reference / views:.0f}x (no bytes read)")
    print(f"  reshard mmap + sum of each   {gib_s(mib, touched)}  ratio {reference / touched:.2f}x")


def jax_sharding(order, spec=("x", "y")):
    devices = {d.id: d for d in jax.devices()}
    return JaxSharding(JaxMesh(np.array([devices[d] for d in order]).reshape(2, 4), ("x", "y")), JaxP(*spec))


def bench_device_put(mib: int, repeat: int) -> None:
    shape = (max(1, mib * 1024 * 1024 // 4 // 1024), 1024)
    values = np.random.default_rng(0).random(shape, np.float32)
    jax_a, jax_b = jax_sharding(ORDER_A), jax_sharding(ORDER_B)
    on_jax = jax.block_until_ready(jax.device_put(values, jax_a))
    on_ours = reshard.from_host(values, reshard.jax.to_reshard(jax_a))
    ours_b = reshard.jax.to_reshard(jax_b)
    theirs = best(lambda: jax.block_until_ready(jax.device_put(on_jax, jax_b)), repeat)
    ours = best(lambda: jax.block_until_ready(reshard.jax.device_put(on_jax, jax_b)), repeat)
    core = best(lambda: reshard.reshard(on_ours, ours_b), repeat)
    moved = reshard.jax.device_put(on_jax, jax_b)
    assert moved.sharding == jax_b and np.array_equal(np.asarray(moved), values)
    print(f"device_put {mib} MiB f32 between two 2x4 meshes in device orders {ORDER_A} and {ORDER_B}:")
    print(f"  jax.device_put          {gib_s(mib, theirs)}")
    print(f"  reshard.jax.device_put  {gib_s(mib, ours)}  ratio {theirs / ours:.2f}x")
    print(f"  reshard.reshard         {gib_s(mib, core)}  ratio {theirs / core:.2f}x (ShardedArrays, no jax.Array)")


def per_call(fn, calls: int, repeat: int) -> float:
    def loop():
        for _ in range(calls):
            fn()

    return best(loop, repeat) / calls


def bench_overhead(calls: int, repeat: int) -> None:
    small = np.arange(64, dtype=np.float32).reshape(8, 8)
    jax_a, jax_b = jax_sharding(ORDER_A, ("x",)), jax_sharding(ORDER_B, ("x",))
    on_jax = jax.block_until_ready(jax.device_put(small, jax_a))
    on_ours = reshard.from_host(small, reshard.jax.to_reshard(jax_a))
    ours_b = reshard.jax.to_reshard(jax_b)
    theirs = per_call(lambda: jax.block_until_ready(jax.device_put(on_jax, jax_b)), calls, repeat)
    ours = per_call(lambda: jax.block_until_ready(reshard.jax.device_put(on_jax, jax_b)), calls, repeat)
    core = per_call(lambda: reshard.reshard(on_ours, ours_b), calls, repeat)
    print("call overhead, an 8x8 f32 array between the same two device orders:")
    print(f"  jax.device_put          {theirs * 1e6:.1f} us per call")
    print(f"  reshard.jax.device_put  {ours * 1e6:.1f} us per call  ratio {theirs / ours:.2f}x")
    print(f"  reshard.reshard         {core * 1e6:.1f} us per call  ratio {theirs / core:.2f}x")

    theirs_s = JaxSharding(JaxMesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y")), JaxP("x"))
    ours_s = reshard.NamedSharding(reshard.Mesh(np.arange(8).reshape(2, 4), ("x", "y")), reshard.P("x"))
    runs = iter(range(1, 2 * repeat + 1))

    def loop(s):
        # A shape never asked before in every call, so JAX's cache does not answer.
        base = next(runs) * 2 * calls
        for i in range(calls):
            s.devices_indices_map((base + 2 * i, 4))

    theirs = best(lambda: loop(theirs_s), repeat) / calls
    ours = best(lambda: loop(ours_s), repeat) / calls
    print(f"  devices_indices_map on 8 devices: JAX {theirs * 1e6:.1f} us, reshard {ours * 1e6:.1f} us per call"
          f"  ratio {theirs / ours:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--read-mib", type=int, default=1024, help="size of the safetensors file read")
    parser.add_argument("--put-mib", type=int, default=256, help="size of the array moved between device orders")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000, help="calls per overhead measurement")
    parser.add_argument("--ckpt-mib", type=int, default=256, help="size of the pytree checkpointed (under mpirun)")
    args = parser.parse_args()
    if UNDER_MPI:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize()  # finds Open MPI's processes by itself
        import bench_job  # beside this script

        bench_job.main(args.put_mib, args.ckpt_mib, args.repeat)
        return
    if len(jax.devices()) < 8:
        raise SystemExit(f"needs 8 JAX devices, XLA_FLAGS gave {len(jax.devices())}")
    bench_read(args.read_mib, args.repeat)
    bench_device_put(args.put_mib, args.repeat)
    bench_overhead(args.calls, args.repeat)


if __name__ == "__main__":
    main()
