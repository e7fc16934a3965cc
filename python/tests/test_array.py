"""Sharded arrays in one process: shards are numpy views of the C++ buffers; reshard,
to_host and from_host agree with numpy slicing and with jax.device_put bit for bit."""

from __future__ import annotations

import random

import jax
import ml_dtypes
import numpy as np
import pytest

import reshard
from jax_layouts import random_layout
from reshard import P, errors
from test_plan import same_shape_pair

DTYPES = (np.float32, np.int8, np.int64, ml_dtypes.bfloat16, np.bool_, np.complex64)
TOPOLOGY = reshard.Topology.uniform(64, 1)


def random_values(rng: random.Random, shape, dtype) -> np.ndarray:
    bits = np.random.default_rng(rng.randrange(2**32)).integers(0, 256, int(np.prod(shape)) * np.dtype(dtype).itemsize, np.uint8)
    if np.dtype(dtype) == np.bool_:
        return (bits % 2).astype(np.bool_).reshape(shape)
    return bits.view(dtype).reshape(shape)


def is_nan(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "fc" or values.dtype == ml_dtypes.bfloat16:
        with np.errstate(invalid="ignore"):
            return np.isnan(values.astype(np.complex128) if values.dtype.kind == "c" else values.astype(np.float64))
    return np.zeros(values.shape, bool)


def assert_shards_hold(array: reshard.ShardedArray, values: np.ndarray) -> None:
    expected = array.sharding.devices_indices_map(values.shape)
    assert [s.device for s in array.shards] == array.sharding.mesh.device_ids
    for shard in array.shards:
        assert shard.index == expected[shard.device]
        assert shard.data.shape == values[shard.index].shape
        assert shard.data.tobytes() == values[shard.index].tobytes()


def test_random_reshards_agree_with_numpy_and_jax(rng):
    jax_devices = {d.id: d for d in jax.devices("cpu")}
    for _ in range(40):
        a, b = same_shape_pair(rng)
        values = random_values(rng, a.shape, rng.choice(DTYPES))
        src = reshard.from_host(values, a.reshard(), TOPOLOGY)
        assert_shards_hold(src, values)
        moved = reshard.reshard(src, b.reshard())
        assert moved.sharding == b.reshard() and moved.dtype == values.dtype and moved.shape == values.shape
        assert_shards_hold(moved, values)
        back = reshard.to_host(moved)
        assert back.dtype == values.dtype and back.tobytes() == values.tobytes()
        # jax.device_put between the same two layouts gives the same shards (in
        # device memory: JAX on CPU cannot move between the two host kinds).
        a.memory_kind = b.memory_kind = "device"
        theirs = jax.device_put(jax.device_put(values, a.jax(jax_devices)), b.jax(jax_devices))
        ours = {s.device: s.data for s in moved.shards}
        for shard in theirs.addressable_shards:
            expected, got = np.asarray(shard.data), ours[shard.device.id]
            if values.size == 0:
                # JAX's shards of an empty array hold the whole (empty) array,
                # whatever their index says: compare with the index alone.
                assert got.shape == values[shard.index].shape
                continue
            # XLA may quiet NaN payloads when it copies between devices; reshard
            # keeps every bit (checked against numpy above), JAX every other bit.
            nan = is_nan(expected)
            assert is_nan(got).tolist() == nan.tolist()
            assert expected[~nan].tobytes() == got[~nan].tobytes()


def test_shards_share_the_buffers():
    mesh = reshard.Mesh(np.arange(4).reshape(2, 2), ("x", "y"))
    sharding = reshard.NamedSharding(mesh, P("x"))
    values = np.arange(16, dtype=np.float32).reshape(4, 4)
    array = reshard.from_host(values, sharding)
    first = array.shards[0].data
    assert first.flags.writeable
    first[0, 0] = -1.0  # write through one view ...
    assert array.shards[0].data[0, 0] == -1.0  # ... seen through another
    assert np.shares_memory(first, array.shards[0].data)
    assert reshard.to_host(array)[0, 0] == -1.0
    assert values[0, 0] == 0.0  # from_host copied out of the caller's array
    same = reshard.reshard(array, sharding)
    assert same.shares_memory_with(array)  # nothing moves for an equal layout
    other = reshard.reshard(array, reshard.NamedSharding(mesh, P("y")))
    assert not other.shares_memory_with(array)


def test_shards_outlive_their_array():
    mesh = reshard.Mesh(np.arange(2), ("x",))
    array = reshard.from_host(np.arange(8, dtype=np.int32), reshard.NamedSharding(mesh, P("x")))
    data = array.shards[1].data
    del array
    np.testing.assert_array_equal(data, [4, 5, 6, 7])


def test_from_shards_and_from_callback():
    mesh = reshard.Mesh(np.array([[3, 1], [0, 2]]), ("x", "y"))
    sharding = reshard.NamedSharding(mesh, P(None, ("y", "x")))
    values = np.arange(24, dtype=np.int16).reshape(3, 8)
    index = sharding.devices_indices_map(values.shape)
    built = reshard.ShardedArray.from_shards(values.shape, np.int16, sharding, {d: values[i] for d, i in index.items()})
    np.testing.assert_array_equal(reshard.to_host(built), values)
    called = reshard.ShardedArray.from_callback(values.shape, "i16", sharding, lambda i: values[i])
    np.testing.assert_array_equal(reshard.to_host(called), values)
    assert called.shards[0].device == 3 and called.shards[0].index == index[3]
    wrong = {d: values[i].T if d == 0 else values[i] for d, i in index.items()}
    with pytest.raises(errors.InvalidArgumentError, match="device 0 has shape"):
        reshard.ShardedArray.from_shards(values.shape, np.int16, sharding, wrong)
    with pytest.raises(errors.InvalidArgumentError, match="no shard given"):
        reshard.ShardedArray.from_shards(values.shape, np.int16, sharding, {3: values[index[3]]})


def test_memory_kind_change_keeps_the_layout():
    mesh = reshard.Mesh(np.arange(4), ("x",))
    values = np.arange(8, dtype=np.float64)
    array = reshard.from_host(values, reshard.NamedSharding(mesh, P("x")))
    pinned = reshard.reshard(array, reshard.NamedSharding(mesh, P("x"), "pinned_host"))
    assert pinned.sharding.memory_kind == "pinned_host"
    for before, after in zip(array.shards, pinned.shards):
        assert before.index == after.index and before.data.tobytes() == after.data.tobytes()


def test_errors():
    mesh = reshard.Mesh(np.arange(4), ("x",))
    sharding = reshard.NamedSharding(mesh, P("x"))
    with pytest.raises(errors.IndivisibleError):
        reshard.from_host(np.zeros(6), sharding)
    with pytest.raises(errors.UnsupportedError, match="one process"):
        reshard.from_host(np.zeros(8), sharding, reshard.Topology.uniform(4, 2))
    with pytest.raises(errors.UnknownDeviceError):
        reshard.from_host(np.zeros(8), sharding, reshard.Topology.uniform(2, 1))


def test_from_shards_adopts_numpy_memory_both_ways():
    mesh = reshard.Mesh(np.array([2, 0, 1, 3]), ("x",))
    sharding = reshard.NamedSharding(mesh, P("x"))
    pieces = {d: np.full((2, 3), float(d), np.float32) for d in range(4)}
    array = reshard.ShardedArray.from_shards((8, 3), np.float32, sharding, pieces)
    for shard in array.shards:
        assert np.shares_memory(shard.data, pieces[shard.device]) and shard.data.flags.writeable
    pieces[1][0, 0] = 41.0  # numpy -> shard
    assert {s.device: s for s in array.shards}[1].data[0, 0] == 41.0
    array.shards[0].data[1, 2] = -7.0  # shard (device 2 comes first) -> numpy
    assert pieces[2][1, 2] == -7.0
    assert reshard.to_host(array)[4, 0] == 41.0  # device 1 holds rows 4..5


def test_adopted_numpy_arrays_live_as_long_as_the_shards():
    import gc
    import weakref

    mesh = reshard.Mesh(np.arange(2), ("x",))
    sharding = reshard.NamedSharding(mesh, P("x"))
    pieces = {0: np.arange(4, dtype=np.int64), 1: np.arange(4, 8, dtype=np.int64)}
    alive = weakref.ref(pieces[1])
    array = reshard.ShardedArray.from_shards((8,), np.int64, sharding, pieces)
    del pieces
    gc.collect()
    assert alive() is not None  # the shard holds the numpy array
    moved = reshard.reshard(array, sharding)  # shares the buffers, so it holds them too
    del array
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(moved.shards[1].data, [4, 5, 6, 7])
    view = moved.shards[1].data
    del moved
    gc.collect()
    assert alive() is not None  # a view of the shard keeps it, and so the numpy array
    del view
    gc.collect()
    assert alive() is None


def test_only_a_non_contiguous_shard_is_copied_and_a_wrong_dtype_is_refused():
    mesh = reshard.Mesh(np.arange(2), ("x",))
    sharding = reshard.NamedSharding(mesh, P(None, "x"))
    whole = np.arange(16, dtype=np.int32).reshape(4, 4)
    strided = {0: whole[:, :2], 1: np.ascontiguousarray(whole[:, 2:])}
    array = reshard.ShardedArray.from_shards((4, 4), np.int32, sharding, strided)
    assert not np.shares_memory(array.shards[0].data, whole)  # copied: not C-contiguous
    assert np.shares_memory(array.shards[1].data, strided[1])  # adopted
    np.testing.assert_array_equal(reshard.to_host(array), whole)
    with pytest.raises(errors.InvalidArgumentError, match="device 1 has dtype int64"):
        reshard.ShardedArray.from_shards((4, 4), np.int32, sharding, {0: strided[1], 1: strided[1].astype(np.int64)})


def test_a_read_only_numpy_array_is_a_read_only_shard_and_never_a_destination():
    mesh = reshard.Mesh(np.arange(2), ("x",))
    sharding = reshard.NamedSharding(mesh, P("x"))
    frozen = {d: np.arange(4 * d, 4 * d + 4, dtype=np.float32) for d in range(2)}
    for piece in frozen.values():
        piece.flags.writeable = False
    source = reshard.ShardedArray.from_shards((8,), np.float32, sharding, frozen)
    assert not source.writable
    assert all(np.shares_memory(s.data, frozen[s.device]) and not s.data.flags.writeable for s in source.shards)
    with pytest.raises(ValueError, match="read-only"):
        source.shards[0].data[0] = 1.0
    # As a source it is fine.
    other = reshard.NamedSharding(reshard.Mesh(np.array([1, 0]), ("x",)), P("x"))
    moved = reshard.reshard(source, other)
    np.testing.assert_array_equal(reshard.to_host(moved), np.arange(8, dtype=np.float32))
    # As a destination it is a typed error, and nothing was written.
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        reshard.reshard_into(moved, source)
    np.testing.assert_array_equal(frozen[1], [4, 5, 6, 7])
    writable = reshard.ShardedArray.from_shards((8,), np.float32, sharding, {d: np.zeros(4, np.float32) for d in range(2)})
    reshard.reshard_into(moved, writable)
    np.testing.assert_array_equal(reshard.to_host(writable), np.arange(8, dtype=np.float32))


def test_in_process_group_runs_ranks_as_threads():
    topology = reshard.Topology.uniform(4, 2)
    src = reshard.NamedSharding(reshard.Mesh(np.array([0, 2, 1, 3]), ("x",)), P("x"))
    dst = reshard.NamedSharding(reshard.Mesh(np.arange(4), ("x",)), P("x"))
    values = np.arange(32, dtype=np.float64).reshape(8, 4)
    group = reshard.InProcessGroup(2)

    def rank(t):
        a = reshard.from_host(values, src, topology, transport=t)
        b = reshard.reshard(a, dst, transport=t)
        return b, reshard.to_host(b, transport=t), t.bytes_received

    for r, (b, host, received) in enumerate(group.run(rank)):
        assert [s.device for s in b.shards] == [2 * r, 2 * r + 1]
        for s in b.shards:
            np.testing.assert_array_equal(s.data, values[s.index])
        np.testing.assert_array_equal(host, values)
        assert received > 0
    with pytest.raises(errors.InvalidArgumentError, match="transport has 2 processes"):
        reshard.from_host(values, src, reshard.Topology.uniform(4, 4), transport=group.transport(0))


def test_to_host_and_from_host_through_one_root():
    """With root=, only that process holds the whole array: to_host gives None elsewhere,
    and from_host reads root's values only (the other rank passes zeros of the shape, which
    must not appear anywhere); root receives only what its devices lack."""
    topology = reshard.Topology.uniform(4, 2)
    sharding = reshard.NamedSharding(reshard.Mesh(np.array([3, 0, 2, 1]), ("x",)), P("x"))
    values = np.arange(32, dtype=np.int32).reshape(8, 4)
    group = reshard.InProcessGroup(2)

    def rank(t):
        mine = values if t.rank == 1 else np.zeros_like(values)
        a = reshard.from_host(mine, sharding, topology, transport=t, root=1)
        before = t.bytes_received
        host = reshard.to_host({"a": a}, transport=t, root=1)
        return a, host["a"], t.bytes_received - before

    for r, (a, host, received) in enumerate(group.run(rank)):
        for s in a.shards:
            np.testing.assert_array_equal(s.data, values[s.index])
        if r == 1:
            np.testing.assert_array_equal(host, values)
            assert received == values.nbytes // 2  # the half held by rank 0's devices
        else:
            assert host is None and received == 0


def test_in_process_group_run_fails_as_one_naming_the_rank():
    """A rank that raises fails the group at once: the others, blocked on it, get
    PeerFailedError without waiting out the timeout, and run raises what the failing rank
    raised, its type kept and its rank noted."""
    values = np.arange(8, dtype=np.float32)
    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(2), ("x",)), P("x"))
    for failing, error in [(2, KeyError), (1, errors.InvalidArgumentError)]:
        group = reshard.InProcessGroup(3)
        for r in range(3):
            group.transport(r).timeout = 3600  # a wait on the failed rank must not last this long

        def body(t):
            if t.rank == failing:
                if error is KeyError:
                    raise KeyError("no such tensor")
                reshard.from_host(values, sharding, reshard.Topology.uniform(2, 1), transport=t)  # 1 process, not 3
            return t.all_gather(b"x")

        with pytest.raises(error) as raised:
            group.run(body)
        assert f"rank {failing}" in " ".join(getattr(raised.value, "__notes__", []))
    ok = reshard.InProcessGroup(2).run(lambda t: t.all_gather(bytes([t.rank])))
    assert ok == [[b"\x00", b"\x01"], [b"\x00", b"\x01"]]


def test_without_a_topology_the_default_spans_the_transports_processes():
    """One default everywhere: the meshes' devices over transport.size processes (not one)."""
    mesh = reshard.Mesh(np.arange(4), ("x",))
    values = np.arange(8, dtype=np.float32)
    results = reshard.InProcessGroup(2).run(
        lambda t: (reshard.from_host(values, reshard.NamedSharding(mesh, P("x")), transport=t).topology,
                   reshard.to_host(reshard.from_host(values, reshard.NamedSharding(mesh, P("x")), transport=t),
                                   transport=t)))
    for topology, host in results:
        assert topology == reshard.Topology.uniform(4, 2)
        np.testing.assert_array_equal(host, values)
    with pytest.raises(errors.InvalidArgumentError, match="3 processes"):
        reshard.InProcessGroup(3).run(lambda t: reshard.from_host(values, reshard.NamedSharding(mesh, P("x")),
                                                                  transport=t))
