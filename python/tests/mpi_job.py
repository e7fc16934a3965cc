"""Run by test_mpi.py under ``mpirun -np N``: the N Python processes form one job over
reshard.mpi and together reshard, save, restore (three ways), convert, export and import a model, each
checking the bytes of its own shards. Prints "rank R ok" on success; exits 1 otherwise.
argv: a folder every rank sees, the seed."""

from __future__ import annotations

import json
import pathlib
import sys
import warnings

import ml_dtypes
import numpy as np

import reshard
import reshard.mpi
from reshard import P

SEED_ORDERS = ([0, 4, 1, 5, 2, 6, 3, 7], [0, 1, 4, 5, 2, 3, 6, 7])


def sharding(devices, shape, axes, spec):
    return reshard.NamedSharding(reshard.Mesh(np.array(devices).reshape(shape), axes), spec)


def model(seed):
    gen = np.random.default_rng(seed)
    return {
        "embed": gen.standard_normal((32, 16)).astype(np.float32),
        "layers.0.w": gen.standard_normal((16, 8)).astype(ml_dtypes.bfloat16),
        "layers.0.b": gen.integers(-1000, 1000, 16).astype(np.int64),
        "step": np.array(11, np.int32),
    }


def layouts(order):
    return {
        "embed": sharding(order, (2, 4), ("data", "model"), P("data", "model")),
        "layers.0.w": sharding(order, (2, 4), ("data", "model"), P("model")),
        "layers.0.b": sharding(order, (8,), ("x",), P("x")),
        "step": sharding(order, (8,), ("x",), P()),
    }


def wrong_shards(arrays, values) -> list[str]:
    bad = []
    for name, array in arrays.items():
        for shard in array.shards:
            if shard.data.tobytes() != values[name][shard.index].tobytes():
                bad.append(f"{name} on device {shard.device}")
    return bad


def over_mpi4py_communicator(values, src, dst, rank, size) -> list[str]:
    """The same reshard over a transport on an mpi4py communicator whose ranks run backwards."""
    try:
        from mpi4py import MPI
    except ImportError:  # optional
        return []
    backwards = MPI.COMM_WORLD.Split(0, size - 1 - rank)
    t = reshard.mpi.transport(backwards)
    if t.rank != size - 1 - rank:
        return [f"transport rank {t.rank} on the mpi4py communicator"]
    topology = reshard.Topology.uniform(8, size)
    a = {n: reshard.from_host(v, src[n], topology, transport=t) for n, v in values.items()}
    failures = wrong_shards(reshard.reshard(a, dst, transport=t), values)
    t.close()
    backwards.Free()
    return [f"over mpi4py: {f}" for f in failures]


def small_segments_old_and_new_keyword(values, src, dst, size) -> list[str]:
    """The reshard over transports whose messages go in 256-byte segments (the largest array is 2 KiB),
    asked for by `segment_bytes` and by its old name `chunk_bytes`, which works but warns naming the new one."""
    failures = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = reshard.mpi.transport(chunk_bytes=256)
    if not any(w.category is DeprecationWarning and "segment_bytes" in str(w.message) for w in caught):
        failures.append(f"chunk_bytes= warned {[str(w.message) for w in caught]}")
    for name, t in (("chunk_bytes", old), ("segment_bytes", reshard.mpi.transport(segment_bytes=256))):
        topology = reshard.Topology.uniform(8, size)
        a = {n: reshard.from_host(v, src[n], topology, transport=t) for n, v in values.items()}
        failures += [f"over {name}=256: {f}" for f in wrong_shards(reshard.reshard(a, dst, transport=t), values)]
        t.close()
    return failures


def jax_across_processes_refused(t) -> list[str]:
    """Single-process JAX in each rank is not one JAX job: reshard.jax refuses the transport
    on every rank, typed and before any collective (the barrier after it would hang otherwise)."""
    try:
        import jax
        import reshard.jax as rjax
    except ImportError:  # optional
        return []
    x = jax.device_put(np.arange(8, dtype=np.float32), jax.devices()[0])
    try:
        rjax.device_put(x, x.sharding, transport=t)
    except reshard.errors.UnsupportedError as e:
        t.barrier()
        return [] if "jax.distributed" in str(e) else [f"reshard.jax refused with {e}"]
    t.barrier()
    return [] if t.size == 1 else ["reshard.jax.device_put ran over processes JAX does not know"]


def main(folder: pathlib.Path, seed: int) -> int:
    session = reshard.mpi.session()
    t = reshard.mpi.transport()
    rank, size = t.rank, t.size
    assert (session.rank, session.size) == (rank, size) and reshard.mpi.launched_by_mpi()
    topology = reshard.Topology.uniform(8, size)
    values = model(seed)
    src, dst = layouts(SEED_ORDERS[0]), layouts(SEED_ORDERS[1])
    # A third layout for the restore: fewer devices, another mesh.
    third = {n: sharding([7, 5, 3, 1], (4,), ("y",), P() if v.ndim == 0 else P("y")) for n, v in values.items()}
    failures = small_segments_old_and_new_keyword(values, src, dst, size)

    a = {n: reshard.from_host(v, src[n], topology, transport=t) for n, v in values.items()}
    failures += wrong_shards(a, values)
    before = t.bytes_received
    b = reshard.reshard(a, dst, transport=t)  # the whole model in one operation
    failures += wrong_shards(b, values)
    if size > 1 and t.bytes_received == before:
        failures.append("the reshard received nothing from the other processes")

    stats = reshard.save_checkpoint(b, folder / "ckpt", transport=t)
    restored = reshard.restore_checkpoint(folder / "ckpt", third, topology, transport=t)
    failures += wrong_shards(restored, values)
    into = {n: reshard.from_host(np.zeros_like(v), src[n], topology, transport=t) for n, v in values.items()}
    reshard.restore_checkpoint_into(folder / "ckpt", into, transport=t)
    failures += wrong_shards(into, values)
    hosts = reshard.to_host(restored, transport=t)
    failures += [f"{n} on the host" for n, h in hosts.items() if h.tobytes() != values[n].tobytes()]

    handle = reshard.save_checkpoint_async(a, folder / "ckpt-async", transport=t)
    async_stats = handle.wait()
    again = reshard.restore_checkpoint(folder / "ckpt-async", dst, topology, transport=t)
    failures += wrong_shards(again, values)

    reshard.convert(folder / "ckpt", folder / "model.safetensors", transport=t)
    t.barrier()
    import safetensors.numpy

    theirs = safetensors.numpy.load_file(str(folder / "model.safetensors"))
    failures += [f"{n} in model.safetensors" for n, v in values.items() if theirs[n].tobytes() != v.tobytes()]

    # Export through a map, every process writing its share; and import it back.
    renames = json.dumps({"rules": [{"from": "embed", "to": "model.embed_tokens.weight"},
                                    {"from": "layers.{i}.{p}", "to": "model.layers.{i}.{p}"},
                                    {"from": "step", "to": "step"}]})
    reshard.export(b, folder / "hf", renames, transport=t)
    t.barrier()
    exported = safetensors.numpy.load_file(str(folder / "hf" / "model.safetensors"))
    failures += [f"{n} in the export" for n, v in values.items()
                 if exported[n.replace("layers.", "model.layers.").replace("embed", "model.embed_tokens.weight")]
                 .tobytes() != v.tobytes()]
    imported = reshard.import_model(folder / "hf", renames, reshard.Mesh(np.arange(8), ("x",)), topology,
                                    best_effort="x", transport=t)
    hosts = reshard.to_host(imported, transport=t)
    failures += [f"{n} imported" for n, h in hosts.items() if h.tobytes() != values[n].tobytes()]

    failures += over_mpi4py_communicator(values, src, dst, rank, size)
    failures += jax_across_processes_refused(t)

    if failures:
        print(f"rank {rank}: wrong: {failures}", flush=True)
        return 1
    print(f"rank {rank} ok: wrote {stats.bytes_written} B (async {async_stats.bytes_written} B), "
          f"received {t.bytes_received} B", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), int(sys.argv[2])))
