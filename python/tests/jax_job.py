"""Run by test_jax_job.py under ``mpirun -np N``, and by test_jax_job_tcp.py as a plain
loop of N processes: one multi-process JAX job (4 CPU devices per process, ids p*2048..
on process p; gloo collectives), whose processes use reshard.jax, each touching only its
own devices. Under mpirun ``jax.distributed.initialize()`` finds Open MPI by itself and
every call passes ``transport=reshard.mpi.transport()``; started without it
(JAX_JOB_COORDINATOR, JAX_JOB_PROCESSES, JAX_JOB_PROCESS_ID in the environment), JAX is
given its coordinator and no call passes a transport: reshard.jax uses the job's own.

argv: a folder every process sees, the seed, then phases run in order:
  layouts:K   JAX ids, the seed's jit refusal and its fix, K random layout pairs
              against jax.device_put / numpy, to_host and from_host (root bytes counted),
              errors on one process failing every process, a transport whose
              ranks are not JAX's processes refused, check() naming JAX ids
  save        the model pytree saved (and saved async) as ckpt-N / ckpt-N-async
  restore:M   ckpt-M (saved by M processes) restored onto two other layouts
  export      the model pytree exported as Hugging Face files to export-N
  unpublished (without mpirun; last) a transport process 0 never makes: the others time out
  cut:T       (last) reshard.jax.device_put between two layouts, again and again, over a new
              transport of the job's with a T-second timeout, until the network is cut
              (tests/netns/jax_tcp_test.sh): the error propagates and the process must end
Prints "rank R ok PHASE" per phase and exits 1 on the first failure.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import sys
import traceback

import numpy as np

DEVICES_PER_PROCESS = 4
# The model's tensors as Hugging Face names (the export phase).
EXPORT_MAP = json.dumps({"rules": [
    {"from": "embed", "to": "model.embed.weight"},
    {"from": "layers.w", "to": "model.layers.{layer}.w", "rearrange": "layer a b -> a b"},
    {"from": "layers.b", "to": "model.layers.{layer}.b", "rearrange": "layer a -> a"},
    {"from": "step", "to": "step"},
]})
# The TPU order of the seed: a 4x4 mesh whose rows run across the processes.
TPU_ORDER = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]


def say(text: str) -> None:
    """One line in one write: the processes share mpirun's pipe, and print's separate write
    of the newline lets another process's output in between."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def model_values(seed: int) -> dict[str, np.ndarray]:
    """The checkpointed pytree's values, the same in every process and in the test."""
    import ml_dtypes

    gen = np.random.default_rng(seed)
    return {
        "embed": gen.standard_normal((32, 16)).astype(np.float32),
        "layers.w": gen.standard_normal((4, 16, 8)).astype(ml_dtypes.bfloat16),
        "layers.b": gen.integers(-1000, 1000, (4, 16)).astype(np.int64),
        "step": np.array(11, np.int32),
    }


def model_specs(variant: int) -> dict[str, tuple]:
    """Partition specs of the model on a ("data", "model") mesh, one set per variant."""
    return [
        {"embed": ("data", "model"), "layers.w": (None, "model"), "layers.b": (None, "data"), "step": ()},
        {"embed": ("model",), "layers.w": ("data", None, "model"), "layers.b": (None, ("data", "model")), "step": ()},
        {"embed": (None, "data"), "layers.w": (None, ("model", "data")), "layers.b": (), "step": ()},
    ][variant]


def model_shardings(jax_devices: list, order: list[int], rows: int, variant: int) -> dict[str, object]:
    """The model's shardings on a (rows, n/rows) mesh of `jax_devices` taken in `order`."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    grid = np.array([jax_devices[i] for i in order], dtype=object).reshape(rows, len(order) // rows)
    mesh = Mesh(grid, ("data", "model"))
    return {name: NamedSharding(mesh, PartitionSpec(*spec)) for name, spec in model_specs(variant).items()}


def nest(flat: dict[str, object]) -> dict:
    """{"layers.w": x} as {"layers": {"w": x}}: the tree whose paths reshard.jax names so."""
    tree: dict = {}
    for name, value in flat.items():
        *parents, last = name.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def flat(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def same_up_to_nan_payloads(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """The same bytes, except that a NaN may be another NaN: the collectives behind
    jax.device_put across processes canonicalise NaN payloads (reshard's bytes are
    checked exactly against numpy's slices separately)."""
    from test_array import is_nan

    if ours.tobytes() == theirs.tobytes():
        return True
    nan = is_nan(ours)
    return bool(nan.any() and np.array_equal(nan, is_nan(theirs))
                and ours[~nan].tobytes() == theirs[~nan].tobytes())


def pairs_checked(output: str) -> int:
    """The number of random layout pairs every process of a job checked (the same on each,
    some against jax.device_put, some against numpy alone), read from the job's output."""
    counts = {int(r): (int(n), int(j), int(o))
              for r, n, j, o in re.findall(r"rank (\d+) pairs (\d+) jax (\d+) numpy-only (\d+)", output)}
    assert len(set(counts.values())) == 1, counts  # every process checked the same pairs
    pairs, with_jax, numpy_only = next(iter(counts.values()))
    assert with_jax + numpy_only == pairs and with_jax and numpy_only
    return pairs


class Job:
    def __init__(self, folder: pathlib.Path, seed: int) -> None:
        import jax

        import reshard.jax as rjax

        self.jax, self.rjax = jax, rjax
        self.folder, self.seed = folder, seed
        self.under_mpirun = "JAX_JOB_COORDINATOR" not in os.environ
        if self.under_mpirun:
            import reshard.mpi

            from reshard import _job_transport

            self.transport = reshard.mpi.transport()
            self.via = {"transport": self.transport}
            # What transport=None would use here: the MPI job's own.
            job = _job_transport.job_transport()
            if (job.kind, job.rendezvous, job.rank, job.size) != ("mpi", "mpirun", self.transport.rank,
                                                                  self.transport.size):
                raise AssertionError(f"under mpirun the job's transport is {job.kind} via {job.rendezvous}")
        else:
            # No transport= anywhere: reshard.jax takes None for the job's own transport,
            # made once; this is the same object, for its counters and what it says it is.
            from reshard import _job_transport

            self.transport = _job_transport.job_transport()
            self.via = {}
            if (self.transport.kind, self.transport.rendezvous) != ("tcp", "jax"):
                raise AssertionError(f"the job's transport is {self.transport.kind} via {self.transport.rendezvous}")
        self.rank, self.size = self.transport.rank, self.transport.size
        self.devices = jax.devices()

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            raise AssertionError(f"rank {self.rank}: {what}")

    def make(self, values: np.ndarray, sharding) -> object:
        return self.jax.make_array_from_callback(values.shape, sharding, lambda index: values[index],
                                                 dtype=values.dtype)

    def holds(self, x, values: np.ndarray) -> bool:
        """Whether every shard this process holds of `x` has exactly the bytes of `values` there."""
        return all(np.asarray(s.data).tobytes() == values[s.index].tobytes() for s in x.addressable_shards)

    # -- layouts ---------------------------------------------------------------

    def layouts(self, pairs: int) -> None:
        self.device_ids()
        self.seed_jit_refusal()
        self.random_pairs(pairs)
        self.to_host()
        self.from_host()
        self.failures_fail_every_process()
        if self.under_mpirun:  # a communicator of other ranks is MPI's to make
            self.ranks_that_are_not_jax_processes()
        self.check_names_jax_ids()

    def device_ids(self) -> None:
        ids = [d.id for d in self.devices]
        want = [p * 2048 + i for p in range(self.size) for i in range(DEVICES_PER_PROCESS)]
        self.check(ids == want, f"JAX's device ids are {ids}, the test expects {want}")
        topology = self.rjax.topology()
        self.check(topology.num_devices == len(ids) and topology.num_processes == self.size, f"topology {topology}")
        self.check([topology.process_of(d) for d in range(len(ids))] == [d.process_index for d in self.devices],
                   "reshard's dense device d is not owned by JAX's d-th device's process")

    def seed_sharding(self, order: list[int]):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        grid = np.array([self.devices[i] for i in order], dtype=object).reshape(4, -1)
        return NamedSharding(Mesh(grid, ("data", "model")), PartitionSpec("data", "model"))

    def seed_jit_refusal(self) -> None:
        n = len(self.devices)
        order = TPU_ORDER if n == 16 else [i * (n // 4) + j for j in range(n // 4) for i in range(4)]
        tpu, natural = self.seed_sharding(order), self.seed_sharding(list(range(n)))
        values = np.arange(32 * 8 * 16, dtype=np.float32).reshape(32, 128)
        x = self.make(values, tpu)
        try:
            self.jax.jit(lambda v: v + 1, out_shardings=natural)(x)
            self.check(False, "jit moved an array between device orders, which the seed's JAX refuses")
        except ValueError as e:
            self.check("Received incompatible devices for jitted computation" in str(e), f"JAX said {e}")
        y = self.rjax.device_put(x, natural, **self.via)
        self.check(y.sharding == natural and self.holds(y, values), "reshard.jax.device_put to the natural order")
        z = self.jax.jit(lambda v: v + 1, out_shardings=natural)(y)
        self.check(self.holds(z, values + 1), "jit on the moved array")

    def random_pairs(self, count: int) -> None:
        """`count` random layout pairs over the job's devices (subsets, other device counts,
        memory kinds): reshard.jax.device_put, batched, against numpy's slices everywhere and
        against jax.device_put wherever JAX does it."""
        import ml_dtypes

        from jax_layouts import MEMORY_KINDS, random_layout
        from reshard import errors
        from test_array import random_values

        rng = random.Random(self.seed)
        n = len(self.devices)
        compared = refused = 0
        done = 0
        while done < count:
            batch = []
            while len(batch) < min(25, count - done):
                # Every third pair one JAX does too (over all devices, one memory kind), every third
                # one it refuses (another memory kind), so that both occur whatever the seed; the
                # rest at random, half the targets on the source's devices.
                slot = (done + len(batch)) % 3
                a = random_layout(rng, n, on=list(range(n)) if slot == 0 else None)
                b = random_layout(rng, n, on=a.devices if slot == 0 or rng.random() < 0.5 else None)
                if slot == 0:
                    b.memory_kind = a.memory_kind
                elif slot == 1:
                    b.memory_kind = rng.choice([k for k in MEMORY_KINDS if k != a.memory_kind])
                try:
                    b.reshard().validate(a.shape)
                except errors.ReshardError:
                    continue
                dtype = rng.choice((np.float32, np.int8, np.int64, ml_dtypes.bfloat16, np.bool_, np.uint16))
                batch.append((a, b, random_values(rng, a.shape, dtype)))
            xs = [self.make(v, a.jax(self.devices)) for a, _, v in batch]
            ys = self.rjax.device_put(xs, [b.jax(self.devices) for _, b, _ in batch], **self.via)
            for (a, b, values), x, y in zip(batch, xs, ys):
                where = f"pair {done}: {a} -> {b}"
                self.check(y.sharding == b.jax(self.devices), f"{where}: result sharding {y.sharding}")
                self.check(self.holds(y, values), f"{where}: bytes differ from numpy's slices")
                theirs = self.jax_device_put(x, b.jax(self.devices))  # None: JAX cannot
                if theirs is None:
                    refused += 1
                else:
                    compared += 1
                    self.check(all(same_up_to_nan_payloads(np.asarray(o.data), np.asarray(t.data))
                                   for o, t in zip(sorted(y.addressable_shards, key=lambda s: s.device.id),
                                                   sorted(theirs.addressable_shards, key=lambda s: s.device.id))),
                               f"{where}: bytes differ from jax.device_put's")
                done += 1
        self.check(count < 2 or (compared > 0 and refused > 0),
                   f"{compared} pairs JAX did, {refused} it refused: both must occur")
        say(f"rank {self.rank} pairs {done} jax {compared} numpy-only {refused}")

    def jax_device_put(self, x, target):
        """jax.device_put(x, target) where JAX 0.10.2 moves arrays across processes: the same
        device set and memory kind. Elsewhere None, without asking JAX: it refuses another
        device set ("input and target sharding should have the same set of devices", or
        "does not support cross-host device transfers"), fails another memory kind in
        another device order as a runtime error, refuses a target on only some processes'
        devices on those processes alone (which would leave the others waiting), and aborts
        the process ("Check failed: out_buffers_list[i].size() >= 1" in its shard reorder)
        when some process holds none of the devices."""
        devices = set(x.sharding.device_set)
        if (devices != set(target.device_set) or x.sharding.memory_kind != target.memory_kind
                or {d.process_index for d in devices} != set(range(self.size))):
            return None
        return self.jax.block_until_ready(self.jax.device_put(x, target))

    def to_host(self) -> None:
        values = model_values(self.seed)
        shardings = model_shardings(self.devices, list(range(len(self.devices)))[::-1], 4, 0)
        tree = nest({k: self.make(values[k], shardings[k]) for k in values})
        whole = flat(self.rjax.to_host(tree, **self.via))
        self.check(all(whole[k].tobytes() == values[k].tobytes() and whole[k].dtype == values[k].dtype for k in values),
                   "to_host on every process")
        before = self.transport.bytes_received
        at_root = self.rjax.to_host(tree, **self.via, root=0)
        received = self.transport.bytes_received - before
        if self.rank == 0:
            at_root = flat(at_root)
            self.check(all(at_root[k].tobytes() == values[k].tobytes() for k in values), "to_host(root=0) on root")
            lacking = sum(self.lacking_bytes(shardings[k], values[k]) for k in values)
            self.check(received == lacking, f"root received {received} B, it lacks {lacking} B")
        else:
            self.check(all(v is None for v in flat(at_root).values()), "to_host(root=0) gave a non-root values")
            self.check(received == 0, f"a non-root process received {received} B from to_host(root=0)")

    def from_host(self) -> None:
        """Host values on every process (nothing moves), then on process 0 alone (the others
        pass ShapeDtypeStructs and receive exactly the distinct elements their devices hold)."""
        values = model_values(self.seed)
        shardings = model_shardings(self.devices, self.interleaved(), 4, 2)
        placed = flat(self.rjax.from_host(nest(values), nest(shardings), **self.via))
        self.check(all(placed[k].sharding == shardings[k] and self.holds(placed[k], values[k]) for k in values),
                   "from_host with the values on every process")
        shapes = {k: self.jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in values.items()}
        before = self.transport.bytes_received
        placed = flat(self.rjax.from_host(nest(values if self.rank == 0 else shapes), nest(shardings),
                                          **self.via, root=0))
        received = self.transport.bytes_received - before
        self.check(all(self.holds(placed[k], values[k]) for k in values), "from_host(root=0)")
        held = 0 if self.rank == 0 else sum(self.held_bytes(shardings[k], values[k]) for k in values)
        self.check(received == held, f"received {received} B from from_host(root=0), its devices hold {held} B")

    def held_mask(self, sharding, values: np.ndarray) -> np.ndarray:
        held = np.zeros(values.shape, bool)
        for device, index in sharding.devices_indices_map(values.shape).items():
            if device.process_index == self.rank:
                held[index] = True
        return held

    def held_bytes(self, sharding, values: np.ndarray) -> int:
        return int(self.held_mask(sharding, values).sum()) * values.dtype.itemsize

    def lacking_bytes(self, sharding, values: np.ndarray) -> int:
        return int((~self.held_mask(sharding, values)).sum()) * values.dtype.itemsize

    def failures_fail_every_process(self) -> None:
        """Process 1 passes shardings that do not fit its tree: every process raises at once,
        the others naming process 1, and the transport still works afterwards."""
        from reshard import errors

        values = np.arange(64, dtype=np.float32).reshape(8, 8)
        sharding = self.seed_sharding(list(range(len(self.devices))))
        x = self.make(values, sharding)
        bad = [sharding, sharding] if self.rank == 1 else sharding
        # Told, not timed out: a process that waited out its timeout would raise
        # TransportTimeoutError, which fails the job; how long it took is load's business.
        try:
            self.rjax.device_put({"x": x}, bad, **self.via)
            self.check(False, "device_put with process 1's bad shardings went through")
        except errors.PeerFailedError as e:
            self.check(self.rank != 1 and "process 1" in str(e), f"rank {self.rank} got {e!r}")
        except ValueError as e:
            self.check(self.rank == 1, f"rank {self.rank} raised {e!r}, not PeerFailedError")
        y = self.rjax.device_put(x, self.seed_sharding(list(range(len(self.devices)))[::-1]), **self.via)
        self.check(self.holds(y, values), "the transport after a failed call")

    def ranks_that_are_not_jax_processes(self) -> None:
        """A transport whose ranks run backwards against JAX's process indices is refused on
        every process before anything moves."""
        from mpi4py import MPI

        import reshard.mpi
        from reshard import errors

        backwards = MPI.COMM_WORLD.Split(0, self.size - 1 - self.rank)
        transport = reshard.mpi.transport(backwards)
        x = self.make(np.zeros((8, 8), np.float32), self.seed_sharding(list(range(len(self.devices)))))
        before = transport.bytes_sent
        try:
            self.rjax.device_put(x, x.sharding, transport=transport)
            self.check(False, "a transport with other ranks than JAX's processes was used")
        except errors.UnsupportedError as e:
            self.check("process indices are the transport's ranks" in str(e), f"said {e}")
        self.check(transport.bytes_sent == before, "bytes moved before the refusal")
        transport.close()
        backwards.Free()

    def check_names_jax_ids(self) -> None:
        """check() on the seed's [32, 8, 4096]-like stacked array: its finding and its report's
        pictures (rank 3: the split dimensions drawn, the whole one named) name JAX's ids."""
        from jax.sharding import NamedSharding, PartitionSpec

        n = len(self.devices)
        order = list(range(n))[::-1]
        committed = NamedSharding(self.seed_sharding(order).mesh, PartitionSpec(None, "data", "model"))
        x = self.make(np.zeros((4, 8, 64), np.float32), committed)
        found = self.rjax.check({"w": x}, self.seed_sharding(list(range(n))).mesh)
        self.check(len(found) == 1 and found[0].path == "w", f"check found {found}")
        self.check(found[0].devices == tuple(self.devices[i].id for i in order), f"check's devices {found[0].devices}")
        self.check(str(self.devices[-1].id) in str(found[0]), f"check's finding names no JAX id: {found[0]}")
        report = found[0].report()
        pictures = report.split("\n", 1)[1]
        self.check("as it lies:" in pictures and "after the fix:" in pictures and "dim 0 (4) whole" in pictures,
                   f"check's report:\n{report}")
        self.check(f"CPU {self.devices[-1].id}" in pictures or f",{self.devices[-1].id}" in pictures,
                   f"the report's pictures name no JAX id:\n{report}")
        if self.rank == 0:
            say(report)

    def unpublished(self) -> None:
        """The other processes look for a transport that process 0 never makes: each fails
        within its timeout, naming what it waited for (a phase to run last: the others'
        transports are numbered one ahead of process 0's after it)."""
        import time

        from reshard import _job_transport, errors

        if self.rank == 0:
            return
        start = time.monotonic()
        try:
            _job_transport.transport(timeout=1.0)
            self.check(False, "a transport was made without process 0")
        except errors.TransportTimeoutError as e:
            self.check("process 0 of the JAX job did not publish its address" in str(e), f"said {e}")
        self.check(time.monotonic() - start < 20, f"waited {time.monotonic() - start:.1f} s for a 1 s timeout")

    def cut(self, timeout: int) -> None:
        """Moves an array between two device orders until the test cuts the network between
        the hosts (saying "rank R looping" once it moves): never returns normally. The job's
        own transport waits 60 s for a silent peer; this one, made the same way, `timeout`."""
        import itertools

        from reshard import _job_transport

        transport = _job_transport.transport(timeout=float(timeout))
        self.check((transport.kind, transport.rendezvous) == ("tcp", "jax"), f"transport {transport.kind}")
        n = len(self.devices)
        layouts = [self.seed_sharding(list(range(n))), self.seed_sharding(list(range(n))[::-1])]
        values = np.arange(n * 4096, dtype=np.float32).reshape(32, -1)
        x = self.make(values, layouts[0])
        for step in itertools.count():
            if step == 1:
                say(f"rank {self.rank} looping")
            x = self.rjax.device_put(x, layouts[(step + 1) % 2], transport=transport)

    # -- checkpoints and exports -----------------------------------------------

    def export(self) -> None:
        """The model pytree, laid out across the job, exported as Hugging Face files to export-N
        (the test compares them with a single process's, byte for byte)."""
        values = model_values(self.seed)
        shardings = model_shardings(self.devices, self.interleaved(), 4, 1)
        tree = nest({k: self.make(values[k], shardings[k]) for k in values})
        self.rjax.export(tree, self.folder / f"export-{self.size}", EXPORT_MAP, hf_config={"model_type": "test"},
                         max_shard_size="2KiB", **self.via)


    def save(self) -> None:
        values = model_values(self.seed)
        shardings = model_shardings(self.devices, self.interleaved(), 4, 0)
        tree = nest({k: self.make(values[k], shardings[k]) for k in values})
        self.rjax.save(tree, self.folder / f"ckpt-{self.size}", **self.via)
        handle = self.rjax.save_async(tree, self.folder / f"ckpt-{self.size}-async", **self.via)
        del tree  # the arrays may go once the call returns
        handle.wait()

    def interleaved(self) -> list[int]:
        n = len(self.devices)
        return [i * (n // 4) + j for j in range(n // 4) for i in range(4)]

    def restore(self, saved_by: int) -> None:
        values = model_values(self.seed)
        for name, variant, rows in ((f"ckpt-{saved_by}", 1, 2), (f"ckpt-{saved_by}-async", 2, 4)):
            order = list(range(len(self.devices)))
            random.Random(self.seed + variant).shuffle(order)
            shardings = model_shardings(self.devices, order, rows, variant)
            restored = flat(self.rjax.restore(self.folder / name, nest(shardings), **self.via))
            for key in values:
                self.check(restored[key].sharding == shardings[key], f"{name} {key}: sharding {restored[key].sharding}")
                self.check(self.holds(restored[key], values[key]), f"{name} {key}: bytes differ")


def main() -> int:
    folder, seed, phases = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["JAX_ENABLE_X64"] = "1"
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    coordinator = os.environ.get("JAX_JOB_COORDINATOR")
    if coordinator:  # started by a plain loop of processes (jax_launch.py), as TPU pods and ssh loops start jobs
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=int(os.environ["JAX_JOB_PROCESSES"]),
                                   process_id=int(os.environ["JAX_JOB_PROCESS_ID"]))
    else:
        jax.distributed.initialize()  # finds Open MPI by itself
    job = Job(folder, seed)
    try:
        for phase in phases:
            name, _, arg = phase.partition(":")
            getattr(job, name)(*([int(arg)] if arg else []))
            say(f"rank {job.rank} ok {phase}")
    except Exception:  # noqa: BLE001 - reported, then the process fails
        say(f"rank {job.rank} FAILED (RESHARD_SEED={seed})\n{traceback.format_exc()}")
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    sys.exit(main())
