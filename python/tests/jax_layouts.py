"""Random layouts built twice, as reshard's and as JAX's, for differential tests."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

import reshard

AXIS_NAMES = ("a", "b", "data", "model", "x", "y", "z")
MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")
NUM_DEVICES = 64


@dataclasses.dataclass
class Layout:
    """One layout: a mesh (sizes, names, device order), a spec and a shape."""

    axis_names: tuple[str, ...]
    axis_sizes: tuple[int, ...]
    devices: list[int]  # row-major mesh order
    spec: tuple  # entries: None, a name, or a tuple of names
    shape: tuple[int, ...]
    memory_kind: str = "device"

    def reshard(self) -> reshard.NamedSharding:
        mesh = reshard.Mesh(np.array(self.devices).reshape(self.axis_sizes), self.axis_names)
        return reshard.NamedSharding(mesh, reshard.P(*self.spec), self.memory_kind)

    def jax(self, jax_devices):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        grid = np.array([jax_devices[d] for d in self.devices], dtype=object).reshape(self.axis_sizes)
        return NamedSharding(Mesh(grid, self.axis_names), PartitionSpec(*self.spec), memory_kind=self.memory_kind)


def random_axis_sizes(rng: random.Random, num_devices: int = NUM_DEVICES) -> tuple[int, ...]:
    """1 to 4 axes (some of size 1) whose product is at most `num_devices`."""
    sizes: list[int] = []
    for _ in range(rng.randint(1, 4)):
        room = num_devices // int(np.prod(sizes, dtype=np.int64))
        sizes.append(rng.choice([s for s in (1, 2, 3, 4, 8, 16) if s <= room]))
    return tuple(sizes)


def factored_axis_sizes(rng: random.Random, count: int) -> tuple[int, ...]:
    """1 to 4 axes (some of size 1) whose product is exactly `count`."""
    factors, rest, p = [], count, 2
    while rest > 1:
        while rest % p == 0:
            factors.append(p)
            rest //= p
        p += 1
    sizes = [1] * rng.randint(1, 4)
    for f in factors:
        sizes[rng.randrange(len(sizes))] *= f
    return tuple(sizes)


def random_layout(rng: random.Random, num_devices: int = NUM_DEVICES, on: list[int] | None = None) -> Layout:
    """A random mesh over some of devices 0..num_devices-1 (or exactly the devices `on`) in
    a random order, with a random spec and shape."""
    sizes = random_axis_sizes(rng, num_devices) if on is None else factored_axis_sizes(rng, len(on))
    names = tuple(rng.sample(AXIS_NAMES, len(sizes)))
    count = int(np.prod(sizes))
    # A random device set in a random order (sometimes 0..n-1 in order).
    if on is not None:
        devices = rng.sample(on, len(on))
    else:
        devices = list(range(count)) if rng.random() < 0.2 else rng.sample(range(num_devices), count)
    rank = rng.randint(0, 4)
    entries: list[list[str]] = [[] for _ in range(rank)]
    if rank:
        for name in rng.sample(names, len(names)):  # random order: tuples in random order
            if rng.random() < 0.6:
                entries[rng.randrange(rank)].append(name)
    spec = [None if not e else (e[0] if len(e) == 1 and rng.random() < 0.7 else tuple(e)) for e in entries]
    # Unspecified trailing dimensions: drop trailing Nones (sometimes keep some).
    while spec and spec[-1] is None and rng.random() < 0.7:
        spec.pop()
    axis_size = dict(zip(names, sizes))
    shape = []
    for d in range(rank):
        entry = entries[d]
        chunks = int(np.prod([axis_size[a] for a in entry], dtype=np.int64))
        shape.append(chunks * rng.choice((0, 1, 1, 2, 3)) if rng.random() < 0.1 else chunks * rng.randint(1, 3))
    return Layout(names, sizes, devices, tuple(spec), tuple(shape), rng.choice(MEMORY_KINDS))
