"""reshard.plan: every target element comes from a holder of it, exactly once; the stats add up."""

import random

import numpy as np
import pytest

import reshard
from jax_layouts import random_layout
from reshard import P, errors


def same_shape_pair(rng: random.Random):
    """Two random layouts of one shape (the second found by retrying)."""
    while True:
        a, b = random_layout(rng), random_layout(rng)
        try:
            b.reshard().validate(a.shape)
            return a, b
        except errors.ReshardError:
            continue


def test_random_plans_cover_every_target_element_once_from_a_holder(rng):
    for _ in range(100):
        src_layout, dst_layout = same_shape_pair(rng)
        shape = src_layout.shape
        src, dst = src_layout.reshard(), dst_layout.reshard()
        topology = reshard.Topology.uniform(64, rng.choice((1, 2, 4)))
        dtype = rng.choice((np.float32, np.int8, "bf16"))
        plan = reshard.plan(shape, dtype, src, dst, topology)
        plan.validate()
        assert plan.shape == shape and plan.src == src and plan.dst == dst and plan.topology == topology
        element = np.dtype(reshard.numpy_dtype(reshard.dtype_name(dtype))).itemsize

        src_boxes = dict(zip(src_layout.devices, src.index_domains(shape)))
        covered = {d: np.zeros(shape, np.int32) for d in dst_layout.devices}
        stats = dict(same_device=0, same_process=0, cross_process=0)
        for t in plan.transfers:
            holder = src_boxes[t.src]
            assert all(h0 <= b0 and b0 + n <= h0 + hn for h0, hn, b0, n in zip(holder.origin, holder.shape, t.box.origin, t.box.shape))
            covered[t.dst][t.box.slices] += 1
            nbytes = t.box.volume * element
            if t.src == t.dst:
                stats["same_device"] += nbytes
            elif topology.process_of(t.src) == topology.process_of(t.dst):
                stats["same_process"] += nbytes
            else:
                stats["cross_process"] += nbytes
        for device, box in zip(dst_layout.devices, dst.index_domains(shape)):
            expected = np.zeros(shape, np.int32)
            expected[box.slices] = 1
            np.testing.assert_array_equal(covered[device], expected)
        s = plan.stats
        assert s.bytes_same_device == stats["same_device"]
        assert s.bytes_same_process == stats["same_process"]
        assert s.bytes_cross_process == stats["cross_process"]
        assert s.bytes_total == sum(stats.values())
        assert s.to_dict()["bytes_total"] == s.bytes_total


def test_the_seeds_two_device_orders_move_nothing_across_processes_when_each_process_keeps_its_devices():
    a = reshard.Mesh(np.array([0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]).reshape(4, 4), ("data", "model"))
    b = reshard.Mesh(np.arange(16).reshape(4, 4), ("data", "model"))
    src = reshard.NamedSharding(a, P(None, "data"))
    dst = reshard.NamedSharding(b, P(None, "data"))
    plan = reshard.plan((8, 4096), np.float32, src, dst, reshard.Topology.uniform(16, 1))
    assert plan.stats.bytes_total == 16 * 8 * 1024 * 4
    assert plan.stats.bytes_cross_process == 0
    assert plan == reshard.plan((8, 4096), "F32", src, dst, reshard.Topology.uniform(16, 1))


def test_plan_errors_are_typed():
    mesh = reshard.Mesh(np.arange(4), ("x",))
    src = reshard.NamedSharding(mesh, P("x"))
    with pytest.raises(errors.IndivisibleError):
        reshard.plan((6,), np.float32, src, src, reshard.Topology.uniform(4))
    with pytest.raises(errors.UnknownDeviceError):
        reshard.plan((8,), np.float32, src, src, reshard.Topology.uniform(2))
    with pytest.raises(errors.UnsupportedError):
        reshard.plan((8,), object, src, src, reshard.Topology.uniform(4))
