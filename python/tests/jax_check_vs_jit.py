"""Run by test_jax_check.py in a fresh interpreter with 8 forced CPU devices:
reshard.jax.check flags exactly the arrays that jit refuses, for each kind of use
(out_shardings on a mesh, plain arguments, in_shardings), and after
reshard.jax.device_put to each fix jit accepts them all.
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


MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")


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
    for trial in range(8):
        wrong += check_arguments(rng, devices, trial) + check_in_shardings(rng, devices, trial)
    print(f"seed {seed}: {wrong} mismatches")
    return 1 if wrong else 0


def jit_refuses(call, *phrases: str) -> bool:
    try:
        jax.block_until_ready(call())
        return False
    except ValueError as e:
        assert any(p in str(e) for p in phrases), e
        return True


def check_arguments(rng, devices, trial) -> int:
    """Plain jit(f)(*args): refused exactly when the committed arguments' device orders
    differ; check(use="arguments") flags the others than the first committed one (or than
    a given mesh), and after the fixes jit takes them together."""
    leaves = [random_array(rng, devices, i) for i in range(4)]
    tree = {"args": leaves}
    call = lambda args: jit_refuses(lambda: jax.jit(lambda *a: sum(v + 0 for v in a))(*args),  # noqa: E731
                                    "incompatible devices")
    refused = call(leaves)
    records = rjax.check(tree, use="arguments")
    wrong = 0
    if bool(records) != refused:
        print(f"arguments trial {trial}: check found {[str(r) for r in records]}, jit refused: {refused}")
        wrong += 1
    mesh = random_mesh(rng, devices)
    records = rjax.check(tree, mesh, use="arguments")
    for r in records:
        print(r)
    fixes = {r.path: r.target for r in records}
    fixed = [rjax.device_put(x, fixes[f"args.{i}"]) if f"args.{i}" in fixes else x for i, x in enumerate(leaves)]
    on_mesh = jax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P()))
    if call([*fixed, on_mesh]) or rjax.check({"args": fixed}, mesh, use="arguments"):
        print(f"arguments trial {trial}: jit still refuses after the fixes onto the mesh")
        wrong += 1
    for i, x in enumerate(leaves):  # each against an argument on the mesh
        if call([x, on_mesh]) != (f"args.{i}" in fixes):
            print(f"arguments trial {trial}: args.{i} flagged {f'args.{i}' in fixes}, refused {not refused}")
            wrong += 1
    return wrong


def random_in_sharding(rng, devices):
    mesh = random_mesh(rng, devices, rng.choice([2, 4, 8, 8, 8]))
    kind = "device" if rng.random() < 0.8 else rng.choice(MEMORY_KINDS)
    return NamedSharding(mesh, rng.choice(SPECS[2]), memory_kind=kind)


def check_in_shardings(rng, devices, trial) -> int:
    """jit(f, in_shardings=s)(x): check(use="in_shardings") flags exactly the arrays jit
    refuses (another tiling of a committed array, another memory kind), and jit takes
    each fix. Half the targets are the array's own tiling on other devices or in another
    order, which jit reshards itself."""
    wrong = 0
    for i in range(6):
        x = random_array(rng, devices, i)
        if rng.random() < 0.5 and isinstance(x.sharding, NamedSharding):
            count = x.sharding.mesh.devices.size
            mesh = Mesh(np.array(rng.sample(devices, count), dtype=object).reshape(x.sharding.mesh.devices.shape),
                        x.sharding.mesh.axis_names)
            target = NamedSharding(mesh, x.sharding.spec)
        else:
            target = random_in_sharding(rng, devices)
        phrases = ("does not match the sharding", "Memory kinds passed to jax.jit does not match")
        refused = jit_refuses(lambda: jax.jit(lambda v: v + 1, in_shardings=target)(x), *phrases)
        records = rjax.check({"x": x}, use="in_shardings", in_shardings=target)
        if bool(records) != refused:
            print(f"in_shardings trial {trial}.{i}: {x.sharding} -> {target}: check {[str(r) for r in records]}, "
                  f"jit refused {refused}")
            wrong += 1
        for r in records:
            print(r)
            fixed = rjax.device_put(x, r.target)
            if jit_refuses(lambda: jax.jit(lambda v: v + 1, in_shardings=target)(fixed), *phrases):
                print(f"in_shardings trial {trial}.{i}: jit refuses the fix")
                wrong += 1
    return wrong


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
