"""reshard.jax: shardings convert both ways as JAX builds them, arrays round-trip,
and device_put agrees with jax.device_put bit for bit, including between the
seed's two device orders."""

from __future__ import annotations

import subprocess
import sys

import jax
import ml_dtypes
import numpy as np
import pytest

import reshard
import reshard.jax as rjax
from jax_layouts import random_layout
from reshard import P, errors
from test_array import is_nan, random_values
from test_plan import same_shape_pair

DTYPES = (np.float32, np.int8, np.int64, ml_dtypes.bfloat16, np.bool_, np.uint16)
JP = jax.sharding.PartitionSpec
SEED_ORDERS = (
    [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15],
    [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15],
)


@pytest.fixture(scope="module")
def devices():
    return {d.id: d for d in jax.devices("cpu")}


def seed_sharding(devices, order, spec):
    grid = np.array([devices[d] for d in order], dtype=object).reshape(4, 4)
    return jax.sharding.NamedSharding(jax.sharding.Mesh(grid, ("data", "model")), spec)


def test_shardings_convert_both_ways(rng, devices):
    for _ in range(200):
        layout = random_layout(rng)
        theirs, ours = layout.jax(devices), layout.reshard()
        assert rjax.to_reshard(theirs) == ours
        back = rjax.from_reshard(ours)
        assert back == theirs and back.memory_kind == theirs.memory_kind
        assert list(back.mesh.devices.flat) == list(theirs.mesh.devices.flat)
    topology = rjax.topology()
    assert topology.num_devices == len(jax.devices()) and topology.num_processes == 1
    single = rjax.to_reshard(jax.sharding.SingleDeviceSharding(devices[5]))
    assert single == reshard.NamedSharding(reshard.Mesh([5], ("device",)), P())
    mesh = jax.sharding.Mesh(np.array([devices[0], devices[1]], dtype=object), ("x",))
    unconstrained = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(jax.sharding.PartitionSpec.UNCONSTRAINED))
    with pytest.raises(errors.UnsupportedError, match="no reshard form"):
        rjax.to_reshard(unconstrained)
    with pytest.raises(errors.UnknownDeviceError):
        rjax.from_reshard(reshard.NamedSharding(reshard.Mesh([1000], ("x",)), P()))


def test_arrays_round_trip(rng, devices):
    sharding = seed_sharding(devices, SEED_ORDERS[0], jax.sharding.PartitionSpec("model", "data"))
    values = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    x = jax.device_put(values, sharding)
    ours = rjax.from_jax_array(x)
    assert ours.sharding == rjax.to_reshard(sharding) and ours.dtype == np.float32
    for shard in ours.shards:
        np.testing.assert_array_equal(shard.data, values[shard.index])
    back = rjax.to_jax_array(ours)
    assert back.sharding == sharding
    np.testing.assert_array_equal(np.asarray(back), values)
    host = rjax.to_host({"x": x, "y": [x]})
    np.testing.assert_array_equal(host["y"][0], values)
    # A plain jnp array (one device) moves onto a mesh too.
    plain = jax.device_put(values, devices[3])
    spread = rjax.device_put(plain, sharding)
    assert spread.sharding == sharding
    np.testing.assert_array_equal(np.asarray(spread), values)


def assert_same_shards(ours, theirs, values=None):
    assert ours.sharding == theirs.sharding and ours.shape == theirs.shape and ours.dtype == theirs.dtype
    mine = {s.device.id: np.asarray(s.data) for s in ours.addressable_shards}
    for shard in theirs.addressable_shards:
        expected, got = np.asarray(shard.data), mine[shard.device.id]
        if expected.size == 0:
            # JAX's shards of an empty array may keep the whole (empty) shape,
            # whatever their index says (seen: (0, 8, 0) for index [:, 0:2, :]);
            # ours take the index's shape, as every other shard does.
            assert got.size == 0 and got.shape == np.empty(theirs.shape, np.uint8)[shard.index].shape
            continue
        if values is not None:  # reshard keeps every bit
            assert got.tobytes() == values[shard.index].tobytes()
        # XLA may quiet NaN payloads when it copies; every other bit agrees.
        nan = is_nan(expected)
        assert is_nan(got).tolist() == nan.tolist()
        assert expected[~nan].tobytes() == got[~nan].tobytes()


def test_device_put_agrees_with_jax_on_random_layouts(rng, devices):
    for _ in range(25):
        a, b = same_shape_pair(rng)
        a.memory_kind = b.memory_kind = "device"  # JAX on CPU does not move between host kinds
        values = random_values(rng, a.shape, rng.choice(DTYPES))
        x = jax.device_put(values, a.jax(devices))
        assert_same_shards(rjax.device_put(x, b.jax(devices)), jax.device_put(x, b.jax(devices)), values)


def test_device_put_between_the_seeds_two_device_orders(rng, devices):
    specs = [P(), P("data"), P(None, "model"), P("data", "model"), P("model", "data"), P(("data", "model"))]
    gen = np.random.default_rng(rng.randrange(2**32))
    tree = {}
    shardings = {}
    for i in range(12):
        src_spec, dst_spec = rng.choice(specs), rng.choice(specs)
        src = seed_sharding(devices, SEED_ORDERS[i % 2], jax.sharding.PartitionSpec(*src_spec.to_tuple()))
        dst = seed_sharding(devices, SEED_ORDERS[1 - i % 2], jax.sharding.PartitionSpec(*dst_spec.to_tuple()))
        values = gen.standard_normal((16 * rng.randint(1, 3), 32)).astype(rng.choice((np.float32, ml_dtypes.bfloat16)))
        tree[f"w{i}"] = jax.device_put(values, src)
        shardings[f"w{i}"] = dst
    ours = rjax.device_put(tree, shardings)
    theirs = jax.device_put(tree, shardings)
    for name in tree:
        assert_same_shards(ours[name], theirs[name], np.asarray(tree[name]))
    # One sharding for the whole tree, and numpy leaves placed directly.
    dst = seed_sharding(devices, SEED_ORDERS[1], jax.sharding.PartitionSpec("data"))
    both = rjax.device_put([tree["w0"], np.asarray(tree["w1"])], dst)
    for ours_, source in zip(both, (tree["w0"], tree["w1"])):
        assert_same_shards(ours_, jax.device_put(source, dst), np.asarray(source))


def test_from_host_and_to_host_on_pytrees_agree_with_jax(rng, devices):
    gen = np.random.default_rng(rng.randrange(2**32))
    tree = {"a": gen.standard_normal((16, 8)).astype(np.float32),
            "b": [gen.integers(0, 100, (4, 16)).astype(np.int32)]}
    shardings = {"a": seed_sharding(devices, SEED_ORDERS[0], jax.sharding.PartitionSpec("model", "data")),
                 "b": seed_sharding(devices, SEED_ORDERS[1], jax.sharding.PartitionSpec(None, "data"))}
    ours = rjax.from_host(tree, shardings)
    theirs = jax.device_put(tree, shardings)
    assert_same_shards(ours["a"], theirs["a"], tree["a"])
    assert_same_shards(ours["b"][0], theirs["b"][0], tree["b"][0])
    back = rjax.to_host(ours, root=0)
    np.testing.assert_array_equal(back["a"], tree["a"])
    np.testing.assert_array_equal(back["b"][0], tree["b"][0])


def test_reshard_imports_without_jax():
    code = (
        "import sys; sys.modules['jax'] = None\n"
        "import reshard, numpy as np\n"
        "reshard.to_host(reshard.from_host(np.zeros(4), reshard.NamedSharding(reshard.Mesh([0, 1], ('x',)), reshard.P('x'))))\n"
        "try:\n    import reshard.jax\nexcept ImportError as e:\n    assert 'needs JAX' in str(e), e\nelse:\n    raise SystemExit('imported')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_save_and_restore_a_pytree_onto_another_device_order(tmp_path, rng, devices):
    values = {"w": random_values(rng, (16, 8), np.float32), "b": random_values(rng, (8,), ml_dtypes.bfloat16),
              "e": random_values(rng, (4, 16), np.int32)}
    a = seed_sharding(devices, SEED_ORDERS[0], jax.sharding.PartitionSpec("data", "model"))
    b = seed_sharding(devices, SEED_ORDERS[1], jax.sharding.PartitionSpec("model", "data"))
    a1 = seed_sharding(devices, SEED_ORDERS[0], jax.sharding.PartitionSpec("data"))
    tree = {"params": {"w": jax.device_put(values["w"], a), "layers": [jax.device_put(values["b"], a1)]},
            "opt": (jax.device_put(values["e"], b),), "step": np.int64(3)}
    stats = rjax.save(tree, tmp_path / "ckpt")
    assert stats.bytes_written == sum(v.nbytes for v in values.values()) + 8
    names = sorted(reshard.safetensors.safe_open(f).keys() for f in (tmp_path / "ckpt").glob("*.safetensors"))
    assert names  # data files are plain safetensors
    replicated = seed_sharding(devices, SEED_ORDERS[1], jax.sharding.PartitionSpec())
    targets = {"params": {"w": b, "layers": [jax.ShapeDtypeStruct((8,), ml_dtypes.bfloat16, sharding=replicated)]},
               "opt": (a,)}
    restored = rjax.restore(tmp_path / "ckpt", targets)
    assert restored["params"]["w"].sharding == b and restored["opt"][0].sharding == a
    np.testing.assert_array_equal(np.asarray(restored["params"]["w"]), values["w"])
    assert np.asarray(restored["params"]["layers"][0]).tobytes() == values["b"].tobytes()
    np.testing.assert_array_equal(np.asarray(restored["opt"][0]), values["e"])
    step = rjax.restore(tmp_path / "ckpt", {"step": jax.sharding.SingleDeviceSharding(devices[9])})["step"]
    assert int(step) == 3 and step.sharding.device_set == {devices[9]}
    with pytest.raises(errors.MissingTensorError):
        rjax.restore(tmp_path / "ckpt", {"params": {"v": b}})


def test_from_jax_array_adopts_the_cpu_buffers(devices):
    sharding = seed_sharding(devices, SEED_ORDERS[0], jax.sharding.PartitionSpec("data"))
    x = jax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8), sharding)
    ours = rjax.from_jax_array(x)
    theirs = {s.device.id: np.asarray(s.data) for s in x.addressable_shards}
    for shard in ours.shards:
        assert np.shares_memory(shard.data, theirs[shard.device]) and not shard.data.flags.writeable


def test_transports_must_be_jaxs_processes(rng, devices):
    """A transport of one process is JAX's single process: the same results. A transport of
    two with single-process JAX is refused by every process before anything moves (no hang)."""
    src = seed_sharding(devices, SEED_ORDERS[0], jax.sharding.PartitionSpec("data", "model"))
    dst = seed_sharding(devices, SEED_ORDERS[1], jax.sharding.PartitionSpec("model"))
    values = random_values(rng, (16, 8), np.float32)
    x = jax.device_put(values, src)
    one = reshard.InProcessGroup(1).transport(0)
    assert_same_shards(rjax.device_put({"x": x}, dst, transport=one)["x"], jax.device_put(x, dst), values)
    np.testing.assert_array_equal(rjax.to_host([x], transport=one)[0], values)

    group = reshard.InProcessGroup(2)

    def run(transport):
        try:
            rjax.device_put(x, dst, transport=transport)
        except errors.UnsupportedError as e:
            return str(e)
        return None

    raised = group.run(run)
    assert len(raised) == 2 and all(r is not None and "jax.distributed" in r for r in raised), raised
    with pytest.raises(errors.UnsupportedError, match="transport 2"):
        rjax.to_host(x, transport=group.transport(0))


def test_restore_checks_the_requested_shape_and_casts_the_dtype(tmp_path, devices):
    """A ShapeDtypeStruct target is held to, as Orbax does: another shape is refused naming
    the tensor, a lossless dtype is cast to, a lossy one refused unless casting= allows it."""
    values = np.arange(64 * 32).reshape(64, 32).astype(ml_dtypes.bfloat16)
    saved = jax.device_put(values, seed_sharding(devices, SEED_ORDERS[0], JP("data", "model")))
    rjax.save({"w": saved}, tmp_path / "ckpt")
    target = seed_sharding(devices, SEED_ORDERS[1], JP("model"))
    with pytest.raises(errors.InvalidArgumentError, match=r"shardings\['w'\] asks for shape \(64, 36\).*\(64, 32\)"):
        rjax.restore(tmp_path / "ckpt", {"w": jax.ShapeDtypeStruct((64, 36), values.dtype, sharding=target)})
    wider = rjax.restore(tmp_path / "ckpt", {"w": jax.ShapeDtypeStruct((64, 32), np.float32, sharding=target)})["w"]
    assert wider.dtype == np.float32 and wider.sharding == target
    np.testing.assert_array_equal(np.asarray(wider), values.astype(np.float32))
    half = jax.ShapeDtypeStruct((64, 32), np.float16, sharding=target)
    with pytest.raises(errors.InvalidArgumentError, match="asks for float16.*bfloat16: not a 'safe' cast.*'unsafe'"):
        rjax.restore(tmp_path / "ckpt", {"w": half})
    narrower = rjax.restore(tmp_path / "ckpt", {"w": half}, casting="unsafe")["w"]
    np.testing.assert_array_equal(np.asarray(narrower), values.astype(np.float16))
    with pytest.raises(errors.InvalidArgumentError, match="casting='sideways'"):
        rjax.restore(tmp_path / "ckpt", {"w": target}, casting="sideways")


def test_restore_lays_partition_specs_on_a_mesh(tmp_path, devices):
    values = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    rjax.save({"w": jax.device_put(values, seed_sharding(devices, SEED_ORDERS[0], JP("data")))}, tmp_path / "ckpt")
    mesh = seed_sharding(devices, SEED_ORDERS[1], JP()).mesh
    restored = rjax.restore(tmp_path / "ckpt", {"w": JP(None, "model")}, mesh=mesh)["w"]
    assert restored.sharding == jax.sharding.NamedSharding(mesh, JP(None, "model"))
    np.testing.assert_array_equal(np.asarray(restored), values)
    with pytest.raises(errors.InvalidArgumentError, match=r"shardings\['w'\] is a PartitionSpec.*mesh="):
        rjax.restore(tmp_path / "ckpt", {"w": JP(None, "model")})
    with pytest.raises(errors.InvalidArgumentError, match=r"shardings\['w'\] is a ShapeDtypeStruct without a sharding"):
        rjax.restore(tmp_path / "ckpt", {"w": jax.ShapeDtypeStruct((16, 8), np.float32)})


def test_device_put_takes_what_jax_device_put_takes(devices):
    """A jax.Device, a SingleDeviceSharding and reshard's own NamedSharding as targets, each
    result with the target's sharding as jax.device_put gives it; donate= deletes the
    source, and the result stays intact when its bytes did not move."""
    values = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    sharding = seed_sharding(devices, SEED_ORDERS[0], JP("data", "model"))
    x = jax.device_put(values, sharding)
    for target in (devices[5], jax.sharding.SingleDeviceSharding(devices[7])):
        ours, theirs = rjax.device_put(x, target), jax.device_put(x, target)
        assert ours.sharding == theirs.sharding
        np.testing.assert_array_equal(np.asarray(ours), values)
    mine = reshard.NamedSharding(reshard.Mesh(np.arange(16).reshape(2, 8), ("a", "b")), P("b"))
    ours = rjax.device_put(x, mine)
    assert ours.sharding == rjax.from_reshard(mine)
    np.testing.assert_array_equal(np.asarray(ours), values)
    for target in (sharding, seed_sharding(devices, SEED_ORDERS[1], JP("model"))):  # in place, and moved
        donor = jax.device_put(values, sharding)
        moved = rjax.device_put({"w": donor}, target, donate=True)["w"]
        assert donor.is_deleted()
        jax.device_put(np.zeros_like(values), sharding).block_until_ready()  # reuse of the freed memory
        np.testing.assert_array_equal(np.asarray(moved), values)
    kept = jax.device_put(values, sharding)
    rjax.device_put({"a": kept, "b": x}, sharding, donate={"a": False, "b": False})
    assert not kept.is_deleted()
    with pytest.raises(errors.InvalidArgumentError, match="a target must be a jax Sharding"):
        rjax.device_put(x, "cpu")
