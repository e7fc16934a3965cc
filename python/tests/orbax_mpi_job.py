"""Run by test_orbax_mpi.py under ``mpirun -np N`` (no JAX in the ranks): the N processes restore
the Orbax checkpoints the test wrote onto layouts over the job, each checking its own shards'
bytes and that it read from files only the chunks its boxes touch (counted by TensorStore);
then export a Levanter LoRA model from Orbax together (model, merged, adapter) and convert
one checkpoint through the command line. Prints "rank R ok"; exits 1 otherwise.
argv: the test's folder (cases.json, raw/, reference exports), the seed."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import sys

import numpy as np
import tensorstore as ts

import reshard
import reshard.mpi
import reshard.orbax as ro
from reshard import P

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from orbax_raw import read_raw  # noqa: E402


def target(gen, shape):
    """A layout of `shape` over the job's 8 devices in a random order: (8,) or (2, 4) or (4, 2),
    each dimension split over an axis that divides it, or not."""
    order = [int(d) for d in gen.permutation(8)]
    sizes = [(8,), (2, 4), (4, 2)][gen.integers(3)]
    names = ("u", "v")[:len(sizes)]
    free = [(n, s) for n, s in zip(names, sizes)]
    spec = []
    for n in shape:
        fits = [a for a in free if n % a[1] == 0]
        if fits and gen.random() < 0.8:
            free.remove(fits[0])
            spec.append(fits[0][0])
        else:
            spec.append(None)
    return reshard.NamedSharding(reshard.Mesh(np.array(order).reshape(sizes), names), P(*spec))


def chunk_keys(name, box, chunks, zarr3):
    """The stored keys of the chunks of grid `chunks` that box ((start, stop) per dimension) touches."""
    ranges = [range(a // c, (b + c - 1) // c) for (a, b), c in zip(box, chunks)]
    for index in itertools.product(*ranges):
        if zarr3:
            yield f"{name}/c" + "".join(f"/{i}" for i in index)
        else:
            yield f"{name}/" + (".".join(str(i) for i in index) or "0")


class StoredSizes:
    """The stored size of each chunk key of an item: a file's size in folders, a value's length in
    OCDBT, where values up to its inline limit live inside the b-tree nodes (counted as metadata: 0)."""

    def __init__(self, info):
        self.folder = pathlib.Path(info.path)
        self.kv = None
        if info.use_ocdbt:
            base = ts.KvStore.open({"driver": "file", "path": f"{self.folder}/"}).result()
            self.inline = ts.ocdbt.dump(base).result()["config"]["max_inline_value_bytes"]
            self.kv = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{self.folder}/"}).result()

    def __call__(self, key):
        if self.kv is None:
            return os.path.getsize(self.folder / key)
        size = len(self.kv.read(key).result().value)
        return size if size > self.inline else 0


def boxes_of(array):
    """This process's distinct boxes of `array` (replicas on its devices once)."""
    seen = []
    for shard in array.shards:
        box = tuple(s.indices(n)[:2] for s, n in zip(shard.index, array.shape))
        if box not in seen and shard.data.size:
            seen.append(box)
    return seen


def check_form(form, path, values, gen, t, topology) -> list[str]:
    info = ro.inspect(path)
    zarr3 = info.driver == "zarr3"
    targets = {n: target(gen, v.shape) for n, v in values.items()}
    arrays, stats = ro.restore_with_result(path, targets, transport=t, topology=topology)
    failures = [f"{form}: {n} on {s.device}" for n, a in arrays.items() for s in a.shards
                if s.data.tobytes() != values[n][s.index].tobytes()]
    # Everything onto one device of this process, for the metadata TensorStore reads beside the chunks.
    mine = reshard.NamedSharding(reshard.Mesh([t.rank * (8 // t.size)], ("d",)), P())
    _, whole = ro.restore_with_result(path, mine, transport=t, topology=topology)
    stored = StoredSizes(info)
    every = {n: [tuple((0, d) for d in v.shape)] for n, v in values.items()}

    def chunk_bytes(boxes_by_name, distinct=False):
        keys = [k for n, boxes in boxes_by_name.items() for box in boxes
                for k in chunk_keys(n, box, info.tensors[n].chunks, zarr3)]
        return sum(stored(k) for k in (set(keys) if distinct else keys))

    metadata = whole.bytes_read - chunk_bytes(every)  # metadata files, OCDBT's manifest and b-tree nodes
    needed = {n: boxes_of(a) for n, a in arrays.items()}
    # At most: the chunks each of its boxes touches, and all the metadata; at least: each chunk it
    # touches once (and in folders, the same metadata files).
    limit = chunk_bytes(needed) + metadata
    least = chunk_bytes(needed, distinct=True) + (0 if info.use_ocdbt else metadata)
    want_needed = sum(int(np.prod([b - a for a, b in box])) * values[n].itemsize
                      for n, boxes in needed.items() for box in boxes)
    if stats.bytes_needed != want_needed:
        failures.append(f"{form}: bytes_needed {stats.bytes_needed}, its boxes hold {want_needed}")
    if not least <= stats.bytes_read <= limit or metadata < 0:
        failures.append(f"{form}: read {stats.bytes_read} B, not within [{least}, {limit}] B (metadata {metadata} B)")
    print(f"rank {t.rank} {form}: read {stats.bytes_read} B for {want_needed} B of elements "
          f"(within [{least}, {limit}] B, everything {whole.bytes_read} B)", flush=True)
    return failures


def same_files(a: pathlib.Path, b: pathlib.Path) -> list[str]:
    names = sorted(p.name for p in a.iterdir())
    if names != sorted(p.name for p in b.iterdir()):
        return [f"{a} holds {names}, {b} {sorted(p.name for p in b.iterdir())}"]
    return [f"{a / n} differs from {b / n}" for n in names if (a / n).read_bytes() != (b / n).read_bytes()]


def one_failed_read_fails_every_rank(path: str, out: pathlib.Path, t) -> list[str]:
    """The last rank reads a folder that is no checkpoint: every rank's export fails at once
    (the others naming that rank), nothing is written, and the transport goes on working."""
    from reshard import errors

    if t.size == 1:
        return []
    last = t.size - 1
    # Told, not timed out: a rank that waited out its timeout raises TransportTimeoutError,
    # not PeerFailedError; how long it took is load's business.
    try:
        ro.export(str(out / "nothing-here") if t.rank == last else path, out / "never", "levanter-llama", transport=t)
        return ["an export with one rank's failed read went through"]
    except errors.PeerFailedError as e:
        wrong = [] if t.rank != last and f"process {last}" in str(e) else [f"rank {t.rank} got {e!r}"]
    except errors.ReshardError as e:
        wrong = [] if t.rank == last else [f"rank {t.rank} raised {e!r}, not PeerFailedError"]
    if (out / "never").exists():
        wrong.append("the failed export wrote its folder")
    t.barrier()
    return wrong


def main(folder: pathlib.Path, seed: int) -> int:
    t = reshard.mpi.transport()
    topology = reshard.Topology.uniform(8, t.size)
    cases = json.loads((folder / "cases.json").read_text())
    values = read_raw(folder / "raw")
    gen = np.random.default_rng([seed, t.size])  # the same layouts on every rank
    failures = []
    for form, path in cases["forms"].items():
        failures += check_form(form, path, values, gen, t, topology)

    out = folder / f"np{t.size}"
    for kind, reference in cases["exports"].items():
        ro.export(cases["lora"], out / kind, "levanter-llama", kind=kind, transport=t,
                  lora_config=cases["lora_config"])
        t.barrier()
        if t.rank == 0:
            failures += same_files(out / kind, pathlib.Path(reference))

    failures += one_failed_read_fails_every_rank(cases["lora"], out, t)

    from reshard import _orbax_cli

    if _orbax_cli.main(["convert", cases["forms"]["folders-zarr3"], str(out / "converted")]) != 0:
        failures.append("the convert command failed")
    t.barrier()
    line = {n: reshard.NamedSharding(reshard.Mesh(np.arange(8), ("x",)), P()) for n in values}
    back = reshard.restore_checkpoint(out / "converted", line, topology, transport=t)
    failures += [f"converted {n}" for n, a in back.items() for s in a.shards
                 if s.data.tobytes() != values[n].tobytes()]

    if failures:
        print(f"rank {t.rank}: wrong: {failures}", flush=True)
        return 1
    print(f"rank {t.rank} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), int(sys.argv[2])))
