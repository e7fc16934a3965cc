"""reshard's index maps, shard shapes and replica ids against JAX's, on random layouts.

Every layout is built twice, as a jax.sharding.NamedSharding over the 64
forced CPU devices and as a reshard.NamedSharding over the same device ids;
the answers must be identical for every device.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import reshard
from jax_layouts import random_layout

NUM_LAYOUTS = 1000


@pytest.fixture(scope="module")
def jax_devices():
    devices = jax.devices("cpu")
    assert len(devices) == 64, "conftest forces 64 host devices"
    return {d.id: d for d in devices}


def test_devices_indices_map_shard_shape_and_replica_ids_match_jax(rng, jax_devices):
    for i in range(NUM_LAYOUTS):
        layout = random_layout(rng)
        context = f"layout {i}: {layout}"
        ours = layout.reshard()
        theirs = layout.jax(jax_devices)

        expected_map = {d.id: index for d, index in theirs.devices_indices_map(layout.shape).items()}
        assert ours.devices_indices_map(layout.shape) == expected_map, context
        assert ours.shard_shape(layout.shape) == theirs.shard_shape(layout.shape), context
        assert ours.is_fully_replicated == theirs.is_fully_replicated, context
        assert ours.memory_kind == theirs.memory_kind, context
        assert ours.device_set == {d.id for d in theirs.device_set}, context
        topology = reshard.Topology.uniform(64, 1)
        assert ours.is_fully_addressable(topology, 0) == theirs.is_fully_addressable, context

        # Replica ids are what a real array's shards carry.
        array = jax.device_put(np.zeros(layout.shape, np.int8), theirs)
        expected_replicas = {s.device.id: s.replica_id for s in array.addressable_shards}
        assert ours.replica_ids(layout.shape) == expected_replicas, context
        assert array.sharding.memory_kind == layout.memory_kind, context


def test_addressable_devices_of_a_process_follow_the_topology(rng):
    for _ in range(100):
        layout = random_layout(rng)
        sharding = layout.reshard()
        processes = rng.choice((1, 2, 4, 8))
        topology = reshard.Topology.uniform(64, processes)
        full_map = sharding.devices_indices_map(layout.shape)
        for p in range(processes):
            mine = sharding.addressable_devices(topology, p)
            assert mine == [d for d in layout.devices if d // (64 // processes) == p]
            assert sharding.addressable_devices_indices_map(layout.shape, topology, p) == {
                d: full_map[d] for d in mine
            }
            assert sharding.is_fully_addressable(topology, p) == (len(mine) == len(layout.devices))
