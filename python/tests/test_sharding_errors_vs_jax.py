"""Every error case of spec/sharding.md, raised by reshard where JAX raises.

Each case starts from a random valid layout and breaks it one way. JAX raises
at one of three points: building the PartitionSpec, building the
NamedSharding, or placing an array (device_put). reshard must raise its typed
error (a ValueError) at that point or earlier, naming the spec.
"""

from __future__ import annotations

import dataclasses
import random

import jax
import numpy as np
import pytest

import reshard
from jax_layouts import AXIS_NAMES, Layout, random_layout
from reshard import errors

CASES_PER_KIND = 60
STAGES = ("spec", "sharding", "place")


@pytest.fixture(scope="module")
def jax_devices():
    return {d.id: d for d in jax.devices("cpu")}


def named_axes(spec) -> list[str]:
    return [a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)]


def as_list(entry) -> list:
    return [] if entry is None else [entry] if isinstance(entry, str) else list(entry)


def duplicate_axis(rng: random.Random, layout: Layout) -> Layout | None:
    if not layout.shape:
        return None
    spec = [as_list(e) for e in layout.spec] + [[] for _ in range(len(layout.shape) - len(layout.spec))]
    axis = rng.choice(named_axes(layout.spec) or list(layout.axis_names))
    for _ in range(2 - named_axes(layout.spec).count(axis)):
        spec[rng.randrange(len(spec))].append(axis)
    return dataclasses.replace(layout, spec=tuple(None if not e else tuple(e) for e in spec))


def unknown_axis(rng: random.Random, layout: Layout) -> Layout | None:
    if not layout.shape:
        return None
    missing = [a for a in AXIS_NAMES + ("q",) if a not in layout.axis_names]
    spec = [as_list(e) for e in layout.spec] + [[]]
    spec = spec[: len(layout.shape)]
    spec[rng.randrange(len(spec))].append(rng.choice(missing))
    return dataclasses.replace(layout, spec=tuple(None if not e else tuple(e) for e in spec))


def too_long(rng: random.Random, layout: Layout) -> Layout | None:
    spec = list(layout.spec) + [None] * (len(layout.shape) - len(layout.spec))
    unused = [a for a in layout.axis_names if a not in named_axes(spec)]
    extra = rng.choice(unused) if unused and rng.random() < 0.7 else None
    return dataclasses.replace(layout, spec=tuple(spec) + (extra,) * rng.randint(1, 2) if extra is None else tuple(spec) + (extra,))


def nested_tuple(rng: random.Random, layout: Layout) -> Layout | None:
    if not layout.shape:
        return None
    spec = list(layout.spec) + [None] * (len(layout.shape) - len(layout.spec))
    d = rng.randrange(len(spec))
    spec[d] = tuple(as_list(spec[d])) + ((rng.choice(layout.axis_names),),)
    return dataclasses.replace(layout, spec=tuple(spec))


def indivisible(rng: random.Random, layout: Layout) -> Layout | None:
    sizes = dict(zip(layout.axis_names, layout.axis_sizes))
    chunks = [int(np.prod([sizes[a] for a in as_list(e)])) for e in layout.spec]
    split = [d for d, n in enumerate(chunks) if n > 1]
    if not split:
        return None
    d = rng.choice(split)
    shape = list(layout.shape)
    shape[d] = chunks[d] * rng.randint(0, 2) + rng.randint(1, chunks[d] - 1)
    return dataclasses.replace(layout, shape=tuple(shape))


KINDS = {
    "duplicate_axis": (duplicate_axis, errors.DuplicateAxisError),
    "unknown_axis": (unknown_axis, errors.UnknownAxisError),
    "rank": (too_long, errors.RankError),
    "nested_tuple": (nested_tuple, errors.NestedTupleError),
    "indivisible": (indivisible, errors.IndivisibleError),
}


def jax_failure_stage(layout: Layout, jax_devices) -> str | None:
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    try:
        spec = PartitionSpec(*layout.spec)
    except Exception:
        return "spec"
    grid = np.array([jax_devices[d] for d in layout.devices], dtype=object).reshape(layout.axis_sizes)
    try:
        sharding = NamedSharding(Mesh(grid, layout.axis_names), spec, memory_kind=layout.memory_kind)
    except Exception:
        return "sharding"
    try:
        jax.device_put(np.zeros(layout.shape, np.int8), sharding)
    except Exception:
        return "place"
    return None


def reshard_failure(layout: Layout) -> tuple[str, Exception] | None:
    try:
        spec = reshard.P(*layout.spec)
    except Exception as e:
        return "spec", e
    mesh = reshard.Mesh(np.array(layout.devices).reshape(layout.axis_sizes), layout.axis_names)
    try:
        sharding = reshard.NamedSharding(mesh, spec, layout.memory_kind)
    except Exception as e:
        return "sharding", e
    try:
        sharding.validate(layout.shape)
        sharding.devices_indices_map(layout.shape)
        sharding.shard_shape(layout.shape)
    except Exception as e:
        return "place", e
    return None


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_reshard_raises_where_jax_raises(kind, rng, jax_devices):
    breaker, error_class = KINDS[kind]
    checked = 0
    while checked < CASES_PER_KIND:
        layout = breaker(rng, random_layout(rng))
        if layout is None:
            continue
        checked += 1
        context = f"{kind}: {layout}"
        jax_stage = jax_failure_stage(layout, jax_devices)
        assert jax_stage is not None, f"JAX accepted a broken layout; the case generator is wrong: {context}"
        ours = reshard_failure(layout)
        assert ours is not None, f"JAX raises at {jax_stage}, reshard accepts: {context}"
        stage, error = ours
        assert STAGES.index(stage) <= STAGES.index(jax_stage), context
        assert isinstance(error, error_class), f"{context}: {type(error).__name__}: {error}"
        assert isinstance(error, ValueError) and error.code == kind, context
        if kind != "nested_tuple":
            assert "PartitionSpec(" in str(error), f"{context}: the message names the spec: {error}"


def test_indivisible_message_names_dimension_partitions_size_and_shape():
    mesh = reshard.Mesh(np.arange(8).reshape(2, 4), ("x", "y"))
    with pytest.raises(errors.IndivisibleError) as raised:
        reshard.NamedSharding(mesh, reshard.P(None, ("x", "y"))).shard_shape((4, 12))
    message = str(raised.value)
    for part in ("dimension 1", "divisible by 8", "equal to 12", "(4, 12)", "PartitionSpec(None, ('x', 'y'))"):
        assert part in message


def test_a_scalar_takes_only_the_empty_spec():
    mesh = reshard.Mesh(np.arange(4), ("x",))
    assert reshard.NamedSharding(mesh, reshard.P()).shard_shape(()) == ()
    with pytest.raises(errors.RankError):
        reshard.NamedSharding(mesh, reshard.P("x")).shard_shape(())
    with pytest.raises(errors.RankError):
        reshard.NamedSharding(mesh, reshard.P(None)).devices_indices_map(())


@pytest.mark.parametrize(
    "devices, names",
    [
        ([[0, 0], [1, 2]], ("a", "b")),  # a device twice
        ([[0, 1], [2, 3]], ("a", "a")),  # an axis name twice
        ([0, 1, 2, 3], ("a", "b")),  # fewer dimensions than names
    ],
)
def test_a_bad_mesh_is_refused_at_once_where_jax_fails_on_use(devices, names, jax_devices):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    grid = np.vectorize(jax_devices.get, otypes=[object])(np.array(devices))
    with pytest.raises(Exception):
        jax.device_put(np.zeros((4,)), NamedSharding(Mesh(grid, names), PartitionSpec("a")))
    with pytest.raises(errors.InvalidMeshError):
        reshard.Mesh(devices, names)
