"""The batched reshard and to_host: a whole model (~300 small arrays of mixed
dtypes, nested in dicts and lists) moved in one operation between the seed's
two device orders and random specs, checked against numpy slicing."""

from __future__ import annotations

import collections
import random

import ml_dtypes
import numpy as np
import pytest

import reshard
from reshard import P, errors
from test_array import assert_shards_hold, random_values

DTYPES = (np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.int32, np.int64, np.uint8, np.bool_, np.complex64)
TOPOLOGY = reshard.Topology.uniform(16, 1)
ORDERS = (
    [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15],
    [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15],
)
MESHES = [reshard.Mesh(np.array(order).reshape(4, 4), ("data", "model")) for order in ORDERS]
SPECS = {
    1: [P(), P("data"), P("model"), P(("data", "model")), P(("model", "data"))],
    2: [P(), P("data"), P(None, "model"), P("model", "data"), P(("data", "model"), None), P(None, ("model", "data"))],
    3: [P(), P(None, None, "data"), P("model", None, "data"), P(None, ("data", "model"))],
}


def random_sharding(rng: random.Random, ndim: int) -> reshard.NamedSharding:
    return reshard.NamedSharding(rng.choice(MESHES), rng.choice(SPECS[ndim]))


def random_model(rng: random.Random, count: int):
    """{layer name: {"w": ..., "b": ..., "extra": [...]}} of (values, sharding) leaves."""
    model: dict[str, dict] = {}
    n = 0
    while n < count:
        layer: dict = {}
        for name in ("w", "b"):
            ndim = rng.choice((1, 2, 3))
            shape = tuple(16 * rng.randint(1, 2) if d == 0 else rng.choice((16, 32)) for d in range(ndim))
            if rng.random() < 0.1:
                shape = (0,) + shape[1:]  # empty arrays are in models too
            layer[name] = (random_values(rng, shape, rng.choice(DTYPES)), random_sharding(rng, ndim))
        layer["extra"] = [(random_values(rng, (16,), rng.choice(DTYPES)), random_sharding(rng, 1))]
        model[f"layer{len(model)}"] = layer
        n += 3
    return model


def test_a_model_of_300_arrays_round_trips_in_one_operation(rng):
    model = random_model(rng, 300)
    values = {k: {n: (v[0] if n != "extra" else [v[0][0]]) for n, v in layer.items()} for k, layer in model.items()}
    sources = {
        k: {n: (reshard.from_host(*v, TOPOLOGY) if n != "extra" else [reshard.from_host(*v[0], TOPOLOGY)])
            for n, v in layer.items()}
        for k, layer in model.items()
    }
    targets = {
        k: {n: (random_sharding(rng, v[0].ndim) if n != "extra" else [random_sharding(rng, 1)]) for n, v in layer.items()}
        for k, layer in model.items()
    }
    moved = reshard.reshard(sources, targets)
    assert list(moved) == list(sources)
    hosts = reshard.to_host(moved)
    count = 0
    for k in model:
        for n in ("w", "b", "extra"):
            got, want, host = moved[k][n], values[k][n], hosts[k][n]
            if n == "extra":
                assert isinstance(got, list) and isinstance(host, list)
                got, want, host, target = got[0], want[0], host[0], targets[k][n][0]
            else:
                target = targets[k][n]
            assert got.sharding == target and got.dtype == want.dtype and got.shape == want.shape
            assert_shards_hold(got, want)
            assert host.dtype == want.dtype and host.shape == want.shape and host.tobytes() == want.tobytes()
            count += 1
    assert count >= 300


def test_one_sharding_or_a_prefix_applies_to_a_subtree():
    a = reshard.from_host(np.arange(32, dtype=np.float32).reshape(16, 2), reshard.NamedSharding(MESHES[0], P("data")))
    b = reshard.from_host(np.arange(16, dtype=np.int8), reshard.NamedSharding(MESHES[0], P()))
    replicated = reshard.NamedSharding(MESHES[1], P())
    moved = reshard.reshard([a, (b, b)], replicated)
    assert isinstance(moved, list) and isinstance(moved[1], tuple)
    assert all(x.sharding == replicated for x in (moved[0], *moved[1]))
    split = reshard.NamedSharding(MESHES[1], P("model"))
    moved = reshard.reshard({"a": a, "bs": [b, b]}, {"a": split, "bs": replicated})
    assert moved["a"].sharding == split and moved["bs"][1].sharding == replicated
    np.testing.assert_array_equal(reshard.to_host(moved["a"]), np.arange(32, dtype=np.float32).reshape(16, 2))

    Pair = collections.namedtuple("Pair", "x y")
    moved = reshard.reshard(Pair(a, b), Pair(a.sharding, b.sharding))
    assert isinstance(moved, Pair)
    assert moved.x.shares_memory_with(a) and moved.y.shares_memory_with(b)  # already in place: nothing moves
    assert reshard.reshard([], replicated) == [] and reshard.to_host({}) == {}


def test_batched_errors():
    a = reshard.from_host(np.arange(16, dtype=np.float32), reshard.NamedSharding(MESHES[0], P("data")))
    s = a.sharding
    with pytest.raises(errors.InvalidArgumentError, match="2 items"):
        reshard.reshard([a, a], [s])
    with pytest.raises(errors.InvalidArgumentError, match="keys"):
        reshard.reshard({"a": a}, {"b": s})
    with pytest.raises(TypeError, match=r"tree\[1\] is a int"):
        reshard.reshard([a, 3], s)
    with pytest.raises(TypeError, match="tree is a ndarray"):
        reshard.to_host(np.zeros(3))
    with pytest.raises(errors.IndivisibleError):
        reshard.reshard([a], [reshard.NamedSharding(reshard.Mesh(np.arange(3), ("x",)), P("x"))])
    two = reshard.from_host(np.zeros(16), s, TOPOLOGY)
    other = reshard.ShardedArray.from_callback((16,), np.float64, s, lambda i: 0.0, reshard.Topology.uniform(16, 2))
    with pytest.raises(errors.UnsupportedError, match="one process"):
        reshard.to_host([two, other])
