"""bench_python.py's multi-process mode: one JAX job under mpirun (jax.distributed, 4 CPU
devices per process, gloo collectives), reshard's bytes over reshard.mpi.transport().

1. device_put of a float32 array (--put-mib, 256 MiB by default) from a TPU-order mesh
   (0, 4, 8, 12, 1, 5, ...) to the natural order, and from rows sharded over every
   device to columns: reshard.jax.device_put beside jax.device_put.
2. The same array whole on every process: reshard.jax.to_host (and to_host(root=0))
   beside jax.experimental.multihost_utils.process_allgather, with each process's
   time and peak RSS increase.
3. A pytree of four arrays (--ckpt-mib in all) saved and restored, onto the saved
   shardings and onto others: reshard.jax.save / restore beside orbax-checkpoint's
   StandardCheckpointer (save until wait_until_finished returns).

A time is the slowest process's, from a barrier to its return, best of --repeat after
one untimed call (where JAX compiles).
Peak RSS: before each call the kernel's high-water mark is reset to the current RSS
(writing 5 to /proc/self/clear_refs), so VmHWM after the call minus VmRSS before it is
that call's own peak, whatever ran earlier in the process (freed heap is first handed
back with malloc_trim, so pages an earlier call left cached do not hide a later call's
growth); it includes the result (the whole array, for a gather), and is the largest
over the repeats. reshard's gathers run first, so whatever caching remains favours JAX.
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import pathlib
import shutil
import tempfile
import time

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import reshard
import reshard.jax as rjax
import reshard.mpi

MIB = 1024 * 1024
_LIBC = ctypes.CDLL("libc.so.6")


class Job:
    def __init__(self, repeat: int) -> None:
        self.transport = reshard.mpi.transport()
        self.rank, self.size = self.transport.rank, self.transport.size
        self.repeat = repeat
        self.devices = jax.devices()
        n = len(self.devices)
        tpu_order = [i * (n // 4) + j for j in range(n // 4) for i in range(4)]
        self.tpu, self.natural = self.mesh(tpu_order), self.mesh(list(range(n)))

    def mesh(self, order: list[int]) -> Mesh:
        grid = np.array([self.devices[i] for i in order], dtype=object).reshape(4, -1)
        return Mesh(grid, ("data", "model"))

    def say(self, line: str) -> None:
        if self.rank == 0:
            print(line, flush=True)

    def gathered(self, value: float) -> list[float]:
        return [float(v.decode()) for v in self.transport.all_gather(repr(value).encode())]

    def timed(self, fn) -> tuple[float, list[float], list[int]]:
        """Best over the repeats of the slowest process's time; each process's time of
        that best run, and each process's largest peak RSS increase. One call first,
        untimed: JAX compiles its programs there."""
        fn()
        best, per_process, peaks = float("inf"), [], [0] * self.size
        for _ in range(self.repeat):
            reshard.release_cached_memory()  # kept staging memory would hide the run's own peak
            gc.collect()
            _LIBC.malloc_trim(0)  # freed heap pages back to the system: not counted as in use
            reset_peak_rss()
            before = rss()
            self.transport.barrier()
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            increase = peak_rss() - before
            del result
            times = self.gathered(elapsed)
            peaks = [max(p, int(q)) for p, q in zip(peaks, self.gathered(increase))]
            if max(times) < best:
                best, per_process = max(times), times
        return best, per_process, peaks


def rss() -> int:
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    return _status_kib("VmHWM") * 1024


def reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def block(index: tuple[slice, ...], shape: tuple[int, int]) -> np.ndarray:
    """The benchmark array's values at `index`, computed for that block alone (no process
    holds the whole array before a gather does)."""
    rows, cols = (np.arange(*s.indices(n), dtype=np.float32) for s, n in zip(index, shape))
    return rows[:, None] * shape[1] + cols[None, :]


def make(shape: tuple[int, int], sharding) -> jax.Array:
    return jax.make_array_from_callback(shape, sharding, lambda index: block(index, shape))


def holds(x: jax.Array) -> bool:
    """Whether every shard this process holds of `x` has the benchmark array's values."""
    return all(np.array_equal(np.asarray(s.data), block(s.index, x.shape)) for s in x.addressable_shards)


def gib_s(mib: float, seconds: float) -> str:
    return f"{seconds:.3f} s ({mib / 1024 / seconds:.2f} GiB/s)"


def bench_device_put(job: Job, mib: int) -> None:
    shape = (max(16, mib * MIB // 4 // 1024), 1024)
    cases = [("TPU order -> natural order, P('data', 'model')",
              NamedSharding(job.tpu, P("data", "model")), NamedSharding(job.natural, P("data", "model"))),
             ("rows -> columns over every device (natural order)",
              NamedSharding(job.natural, P(("data", "model"))), NamedSharding(job.natural, P(None, ("data", "model"))))]
    for what, source, target in cases:
        x = make(shape, source)
        theirs, _, _ = job.timed(lambda: jax.block_until_ready(jax.device_put(x, target)))
        ours, _, _ = job.timed(lambda: jax.block_until_ready(rjax.device_put(x, target, transport=job.transport)))
        for who, moved in (("reshard", rjax.device_put(x, target, transport=job.transport)),
                           ("jax", jax.device_put(x, target))):
            assert moved.sharding == target and holds(moved), f"{what}: {who} moved the wrong bytes"
        job.say(f"device_put {mib} MiB f32 {list(shape)}, {job.size} processes x {len(job.devices) // job.size} "
                f"devices, {what}:")
        job.say(f"  jax.device_put          {gib_s(mib, theirs)}")
        job.say(f"  reshard.jax.device_put  {gib_s(mib, ours)}  ratio {theirs / ours:.2f}x")


def per_process(times: list[float], peaks: list[int]) -> str:
    return " | ".join(f"p{p} {t:.3f} s +{m / MIB:.0f} MiB" for p, (t, m) in enumerate(zip(times, peaks)))


def bench_to_host(job: Job, mib: int) -> None:
    shape = (max(16, mib * MIB // 4 // 1024), 1024)
    x = make(shape, NamedSharding(job.tpu, P("data", "model")))
    ours, our_times, our_peaks = job.timed(lambda: rjax.to_host(x, transport=job.transport))
    root, root_times, root_peaks = job.timed(lambda: rjax.to_host(x, transport=job.transport, root=0))
    theirs, their_times, their_peaks = job.timed(lambda: multihost_utils.process_allgather(x, tiled=True))
    whole = rjax.to_host(x, transport=job.transport)
    assert np.array_equal(whole, block((slice(None), slice(None)), shape)), "to_host gathered the wrong bytes"
    del whole
    job.say(f"{mib} MiB f32 {list(shape)} on the TPU-order mesh, whole on the host (time, peak RSS increase "
            f"per process, the result included):")
    job.say(f"  process_allgather          {gib_s(mib, theirs)}: {per_process(their_times, their_peaks)}")
    job.say(f"  reshard.jax.to_host        {gib_s(mib, ours)}: {per_process(our_times, our_peaks)}")
    job.say(f"    ratio time {theirs / ours:.2f}x, peak RSS (largest process) "
            f"{max(their_peaks) / max(1, max(our_peaks)):.2f}x")
    job.say(f"  reshard.jax.to_host(root=0) {gib_s(mib, root)}: {per_process(root_times, root_peaks)}")


def ckpt_tree(job: Job, mib: int, variant: int) -> tuple[dict, dict]:
    """Four arrays of mib/4 MiB each: their shardings (variant 0 as saved, 1 others, on the
    TPU-order, natural and reversed meshes) and their ShapeDtypeStructs."""
    rows = max(16, mib * MIB // 4 // 4 // 1024)
    reversed_ = job.mesh(list(range(len(job.devices)))[::-1])
    specs = [[(job.tpu, P("data", "model")), (job.tpu, P(None, ("data", "model"))), (job.natural, P("model")),
              (job.natural, P(None, "data"))],
             [(job.natural, P("model", "data")), (reversed_, P(("model", "data"))), (job.natural, P(None, "model")),
              (reversed_, P("data", "model"))]][variant]
    shardings = {f"w{i}": NamedSharding(m, s) for i, (m, s) in enumerate(specs)}
    return shardings, {k: jax.ShapeDtypeStruct((rows, 1024), np.float32, sharding=s) for k, s in shardings.items()}


def shared_folder(job: Job) -> pathlib.Path:
    """A folder every process sees (one machine: process 0's temporary folder)."""
    made = tempfile.mkdtemp(prefix="bench-job-") if job.rank == 0 else ""
    return pathlib.Path(job.transport.all_gather(made.encode())[0].decode())


def bench_checkpoint(job: Job, mib: int) -> None:
    import orbax.checkpoint as ocp

    saved, abstract = ckpt_tree(job, mib, 0)
    other, other_abstract = ckpt_tree(job, mib, 1)
    tree = {k: make(a.shape, s) for (k, s), a in zip(saved.items(), abstract.values())}
    folder = shared_folder(job)
    runs, reshard_runs = itertools.count(), itertools.count()
    checkpointer = ocp.StandardCheckpointer()

    # Each run saves a new checkpoint, for both (Orbax refuses an existing one, as reshard does).
    def orbax_save() -> None:
        checkpointer.save(folder / f"orbax-{next(runs)}", tree)
        checkpointer.wait_until_finished()

    figures = {
        "orbax save": job.timed(orbax_save),
        "reshard save": job.timed(lambda: rjax.save(tree, folder / f"reshard-{next(reshard_runs)}",
                                                    transport=job.transport)),
    }
    last = folder / f"orbax-{next(runs) - 1}"
    reshard_last = folder / f"reshard-{next(reshard_runs) - 1}"
    for name, target, orbax_target in (("the saved shardings", saved, abstract), ("others", other, other_abstract)):
        figures[f"orbax restore onto {name}"] = job.timed(lambda: jax.block_until_ready(
            checkpointer.restore(last, orbax_target)))
        figures[f"reshard restore onto {name}"] = job.timed(lambda: jax.block_until_ready(
            rjax.restore(reshard_last, target, transport=job.transport)))
        for who, restored in (("reshard", rjax.restore(reshard_last, target, transport=job.transport)),
                              ("orbax", checkpointer.restore(last, orbax_target))):
            assert all(restored[k].sharding == target[k] and holds(restored[k]) for k in target), f"{who}: {name}"
    job.transport.barrier()
    if job.rank == 0:
        shutil.rmtree(folder)
    job.say(f"a pytree of 4 f32 arrays, {mib} MiB in all, saved and restored by {job.size} processes:")
    for ours, theirs in (("reshard save", "orbax save"),
                         *((f"reshard restore onto {n}", f"orbax restore onto {n}") for n in ("the saved shardings",
                                                                                             "others"))):
        job.say(f"  {theirs:<40} {gib_s(mib, figures[theirs][0])}")
        job.say(f"  {ours:<40} {gib_s(mib, figures[ours][0])}  ratio {figures[theirs][0] / figures[ours][0]:.2f}x")


def main(put_mib: int, ckpt_mib: int, repeat: int) -> None:
    job = Job(repeat)
    job.say(f"one JAX job: {job.size} processes, JAX device ids {[d.id for d in job.devices]}")
    bench_to_host(job, put_mib)  # first, before the other benches' buffers are about
    bench_device_put(job, put_mib)
    bench_checkpoint(job, ckpt_mib)
    job.transport.close()
