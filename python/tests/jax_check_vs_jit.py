"""Run by test_jax_check.py in a fresh interpreter with 8 forced CPU devices:
reshard.jax.check(tree, mesh) flags exactly the arrays that jit on that mesh
refuses, and after reshard.jax.device_put to each fix nothing is flagged.
Prints the records; exits non-zero on a mismatch. argv[1]: the seed."""

from __future__ import annotations

import os
import random
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import reshard.jax as rjax  # noqa: E402

SHAPES = ((2, 4), (4, 2), (8,), (1, 8))
SPECS = {1: (P(), P("a")), 2: (P(), P("a"), P("a", "b"), P(None, ("a", "b")), P("b", "a"))}


def refused_by_jit(x, mesh) -> bool:
    out = NamedSharding(mesh, P())
    try:
        jax.jit(lambda v: v + 1, out_shardings=out)(x).block_until_ready()
        return False
    except ValueError as e:
        assert "incompatible devices" in str(e), e
        return True


def random_mesh(rng, devices, count=8):
    chosen = rng.sample(devices, count)
    shape = rng.choice([s for s in SHAPES if int(np.prod(s)) == count] or [(count,)])
    if len(shape) == 1:
        shape = (1, count)
    return Mesh(np.array(chosen, dtype=object).reshape(shape), ("a", "b"))


def random_array(rng, devices, index):
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) + index
    kind = rng.randrange(5)
    if kind == 0:
        return jax.numpy.asarray(x)  # uncommitted: jit moves it itself
    if kind == 1:
        return jax.device_put(x, rng.choice(devices))  # one device, committed
    count = rng.choice([2, 4, 8, 8, 8])
    mesh = random_mesh(rng, devices, count)
    return jax.device_put(x, NamedSharding(mesh, rng.choice(SPECS[2])))


def x_bytes(record) -> int:
    return int(np.prod(record.shape)) * record.dtype.itemsize * 8  # at most one copy per device


def main(seed: int) -> int:
    rng = random.Random(seed)
    devices = jax.devices()
    wrong = 0
    for trial in range(8):
        mesh = Mesh(np.array(rng.sample(devices, 8), dtype=object).reshape(rng.choice(((2, 4), (4, 2), (8, 1)))),
                    ("a", "b"))
        tree = {"params": [random_array(rng, devices, i) for i in range(5)],
                "same": jax.device_put(np.ones((8, 8), np.float32), NamedSharding(mesh, P("a"))),
                "host": np.zeros(3)}
        # The seed's case: the mesh's own devices in another order, same mesh shape.
        permuted = np.array(list(mesh.devices.flat), dtype=object)[rng.sample(range(8), 8)]
        tree["permuted"] = jax.device_put(np.ones((8, 8), np.float32),
                                          NamedSharding(Mesh(permuted.reshape(mesh.devices.shape), ("a", "b")), P("a")))
        records = rjax.check(tree, mesh)
        flagged = {r.path for r in records}
        names, leaves, _ = rjax._named_leaves(tree)
        refused = {n for n, x in zip(names, leaves) if refused_by_jit(x, mesh)}
        if list(permuted) != list(mesh.devices.flat):
            assert "permuted" in refused, "jit accepted a permuted device order"
        if flagged != refused:
            print(f"trial {trial}: check flagged {sorted(flagged)}, jit refused {sorted(refused)}")
            wrong += 1
        for r in records:
            print(r)
            assert sum(r.bytes_per_process) == r.plan.stats.bytes_total - r.plan.stats.bytes_same_device
            assert 0 <= sum(r.bytes_per_process) <= x_bytes(r)  # 0: every piece already in place
            assert r.target.mesh == mesh
        fixes = {r.path: r.target for r in records}
        leaves_fixed = [rjax.device_put(x, fixes[n]) if n in fixes else x for n, x in zip(names, leaves)]
        fixed = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(tree), leaves_fixed)
        if rjax.check(fixed, mesh):
            print(f"trial {trial}: still flagged after the fixes: {[str(r) for r in rjax.check(fixed, mesh)]}")
            wrong += 1
        for n, before, after in zip(names, leaves, leaves_fixed):
            assert not refused_by_jit(after, mesh), n
            assert np.asarray(before).tobytes() == np.asarray(after).tobytes(), n
    print(f"seed {seed}: {wrong} mismatches")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
