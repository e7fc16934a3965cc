"""The layout classes behave as Python values: construction, properties, equality, repr."""

import numpy as np
import pytest

import reshard
from reshard import P, errors


def test_mesh_keeps_its_device_order_and_shape():
    order = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]
    mesh = reshard.Mesh(np.array(order).reshape(4, 4), ("data", "model"))
    assert mesh.axis_names == ("data", "model")
    assert mesh.shape == {"data": 4, "model": 4}
    assert mesh.axis_sizes == (4, 4)
    assert mesh.size == 16 and mesh.ndim == 2
    assert mesh.device_ids == order
    assert mesh.devices.shape == (4, 4) and mesh.devices.dtype == np.int64
    assert mesh.devices[1, 0] == 1
    assert mesh.coordinates(5) == [1, 1]
    assert mesh.logical_index(4) == 1 and mesh.logical_index(99) is None
    assert mesh != reshard.Mesh.from_axes({"data": 4, "model": 4})
    assert mesh == reshard.Mesh.from_axes([("data", 4), ("model", 4)], order)
    assert hash(mesh) == hash(reshard.Mesh.from_axes({"data": 4, "model": 4}, order))
    assert "devices=[0,4,8,12," in repr(mesh)


def test_mesh_takes_objects_with_an_id_and_a_single_axis_name():
    class Dev:
        def __init__(self, i):
            self.id = i

    mesh = reshard.Mesh([Dev(3), Dev(1)], "x")
    assert mesh.device_ids == [3, 1] and mesh.axis_names == ("x",)


def test_partition_spec_is_a_sequence_of_entries():
    spec = P("data", None, ("x", "y"), ())
    assert len(spec) == 4
    assert list(spec) == ["data", None, ("x", "y"), None]
    assert spec[0] == "data" and spec[-2] == ("x", "y")
    assert spec == P("data", None, ("x", "y"))
    assert P(("x",)) == P("x")
    assert P("x") != P("y") and P("x") != ("x",)
    assert hash(P("x", None)) == hash(P("x"))
    assert repr(spec) == "PartitionSpec('data', None, ('x', 'y'), None)"
    assert P.parse("P('data', None)") == P("data")
    assert P.parse("None,data,(a,b)") == P(None, "data", ("a", "b"))
    assert spec.axis_names == ["data", "x", "y"]
    with pytest.raises(errors.ParseError, match="invalid partition spec"):
        P.parse("(a,")
    with pytest.raises(errors.NestedTupleError):
        P.parse("((a,b),c)")
    with pytest.raises(IndexError):
        spec[4]


def test_named_sharding_accessors():
    mesh = reshard.Mesh(np.arange(8).reshape(2, 4), ("x", "y"))
    sharding = reshard.NamedSharding(mesh, P("x"), "pinned_host")
    assert sharding.mesh == mesh and sharding.spec == P("x")
    assert sharding.memory_kind == "pinned_host"
    assert sharding.with_memory_kind("device").memory_kind == "device"
    assert sharding.with_memory_kind("device") == reshard.NamedSharding(mesh, P("x", None))
    assert sharding.num_devices == 8 and sharding.device_set == set(range(8))
    assert sharding.num_chunks(2) == (2, 1)
    boxes = sharding.index_domains((4, 6))
    assert [b.origin for b in boxes[:5]] == [(0, 0)] * 4 + [(2, 0)]
    assert boxes[4].slices == (slice(2, 4), slice(0, 6)) and boxes[4].volume == 12
    assert not sharding.is_fully_replicated
    assert reshard.NamedSharding(mesh, P()).is_fully_replicated
    assert "memory_kind=pinned_host" in repr(sharding)


def test_uneven_sharding_follows_the_padding_rule():
    mesh = reshard.Mesh(np.arange(4), ("x",))
    sharding = reshard.NamedSharding(mesh, P("x"), uneven=True)
    assert sharding.uneven
    assert sharding.shard_shape((10,)) is None
    assert [b.shape for b in sharding.index_domains((10,))] == [(3,), (3,), (3,), (1,)]
    with pytest.raises(errors.IndivisibleError):
        reshard.NamedSharding(mesh, P("x")).validate((10,))


def test_shapes_take_integers_only():
    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(2), ("x",)), P("x"))
    assert sharding.shard_shape((np.int64(4), 2)) == (2, 2)
    assert sharding.shard_shape(4) == (2,)
    with pytest.raises(TypeError):
        sharding.shard_shape((4.0,))
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        sharding.shard_shape((-2,))


def test_topology():
    topology = reshard.Topology.uniform(8, 2)
    assert topology.num_devices == 8 and topology.num_processes == 2
    assert topology.process_of(5) == 1 and topology.devices_of(0) == [0, 1, 2, 3]
    assert reshard.Topology([0, 1, 0, 1]).devices_of(1) == [1, 3]
    assert topology == reshard.Topology([0, 0, 0, 0, 1, 1, 1, 1])
    with pytest.raises(errors.UnknownDeviceError):
        topology.process_of(8)
    with pytest.raises(errors.InvalidArgumentError):
        reshard.Topology.uniform(8, 3)
