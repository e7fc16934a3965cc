"""What reshard keeps after a call is reported, bounded and given back (reshard.memory)."""

import numpy as np
import pytest

import reshard
from reshard import errors


@pytest.fixture
def restored_limit():
    saved = reshard.cached_memory()["limit"]
    yield
    reshard.set_cached_memory_limit(saved)


def test_a_reshard_leaves_staging_kept_and_release_gives_it_back(restored_limit):
    reshard.set_cached_memory_limit("64MiB")
    reshard.release_cached_memory()
    assert reshard.cached_memory()["staging"] == 0
    mesh = reshard.Mesh(np.arange(4), ("x",))
    group = reshard.InProcessGroup(2)
    topology = reshard.Topology.uniform(4, 2)
    source = reshard.NamedSharding(mesh, reshard.P("x"))
    target = reshard.NamedSharding(mesh, reshard.P(None, "x"))
    whole = np.arange(512 * 512, dtype=np.float32).reshape(512, 512)

    def body(transport):
        x = reshard.from_host(whole, source, topology, transport=transport)
        y = reshard.reshard(x, target, transport=transport)
        np.testing.assert_array_equal(reshard.to_host(y, transport=transport), whole)

    group.run(body)
    held = reshard.cached_memory()
    assert held["limit"] == 64 << 20
    assert held["staging"] > 0, held  # strided messages between the two ranks were packed
    reshard.release_cached_memory()
    assert reshard.cached_memory()["staging"] == 0


def test_the_limit_takes_sizes_and_refuses_nonsense(restored_limit):
    reshard.set_cached_memory_limit(0)
    assert reshard.cached_memory()["limit"] == 0
    reshard.set_cached_memory_limit("1GiB")
    assert reshard.cached_memory()["limit"] == 1 << 30
    with pytest.raises(errors.InvalidArgumentError, match="limit"):
        reshard.set_cached_memory_limit(-1)
    with pytest.raises(errors.ParseError, match="limit"):
        reshard.set_cached_memory_limit("lots")
