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
        stats = dict(same_device=0, same_process=0, cross_process=0, fan_out=0)
        stage = 0
        for t in plan.transfers:
            assert t.stage >= stage, "stage-0 transfers come first"
            stage = t.stage
            if t.stage == 0:
                holder = src_boxes[t.src]
                assert all(h0 <= b0 and b0 + n <= h0 + hn for h0, hn, b0, n in zip(holder.origin, holder.shape, t.box.origin, t.box.shape))
            else:
                # Stage 1 copies, within a process, from a target device that stage 0 filled.
                assert t.stage == 1 and topology.process_of(t.src) == topology.process_of(t.dst)
                assert (covered[t.src][t.box.slices] == 1).all()
            covered[t.dst][t.box.slices] += 1
            nbytes = t.box.volume * element
            if t.stage == 1:
                stats["fan_out"] += nbytes
            elif t.src == t.dst:
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
        assert s.bytes_fan_out == stats["fan_out"]
        assert s.bytes_total == sum(stats.values())
        assert s.to_dict()["bytes_total"] == s.bytes_total
        assert s.to_dict()["bytes_fan_out"] == s.bytes_fan_out
        assert_cross_process_bytes_are_the_minimum(plan, src_layout.devices, dst_layout.devices, element)


def assert_cross_process_bytes_are_the_minimum(plan, src_devices, dst_devices, element: int) -> None:
    """For every process p, the bytes that cross into p are those of (the union of
    p's target slices) minus (the union of p's source slices): none twice."""
    shape, topology = plan.shape, plan.topology
    src_boxes = dict(zip(src_devices, plan.src.index_domains(shape)))
    dst_boxes = dict(zip(dst_devices, plan.dst.index_domains(shape)))
    crossing = {}
    for t in plan.transfers:
        into = topology.process_of(t.dst)
        if t.stage == 0 and topology.process_of(t.src) != into:
            crossing[into] = crossing.get(into, 0) + t.box.volume * element
    for p in range(topology.num_processes):
        needed = np.zeros(shape, bool)
        held = np.zeros(shape, bool)
        for d, box in dst_boxes.items():
            if topology.process_of(d) == p:
                needed[box.slices] = True
        for d, box in src_boxes.items():
            if topology.process_of(d) == p:
                held[box.slices] = True
        assert crossing.get(p, 0) == int((needed & ~held).sum()) * element, f"process {p}"


def test_a_replicated_target_crosses_into_each_process_once_then_fans_out():
    # 8 devices, 2 processes of 4: the source splits rows over all 8, the
    # target replicates the whole array on every device.
    topology = reshard.Topology.uniform(8, 2)
    mesh = reshard.Mesh(np.arange(8), ("x",))
    src = reshard.NamedSharding(mesh, P("x"))
    dst = reshard.NamedSharding(mesh, P())
    shape, element = (8, 16), 4
    whole = 8 * 16 * element
    plan = reshard.plan(shape, np.float32, src, dst, topology)
    plan.validate()
    stage1 = [t for t in plan.transfers if t.stage == 1]
    assert stage1, "the other devices of each process copy from the one that received"
    assert {t.dst for t in stage1} <= set(range(8))
    assert all(topology.process_of(t.src) == topology.process_of(t.dst) for t in stage1)
    # Each process lacks half the array; that half crosses in once.
    assert plan.stats.bytes_cross_process == 2 * (whole // 2)
    assert plan.stats.max_process_send_bytes == whole // 2
    assert plan.stats.bytes_fan_out == 2 * 3 * (whole // 2)
    assert plan.stats.bytes_total == 8 * whole
    assert_cross_process_bytes_are_the_minimum(plan, range(8), range(8), element)

    # The per-device baseline: every device fetches the remote half itself.
    baseline = reshard.plan(shape, np.float32, src, dst, topology, fan_out=False, balance_senders=False)
    baseline.validate()
    assert all(t.stage == 0 for t in baseline.transfers)
    assert baseline.stats.bytes_fan_out == 0
    assert baseline.stats.bytes_cross_process == 4 * plan.stats.bytes_cross_process
    assert baseline.stats.bytes_total == plan.stats.bytes_total
    options = reshard.PlanOptions()
    assert options.fan_out and options.balance_senders


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
