"""NamedSharding.picture: the layout drawn for any rank, labelled with a JAX job's device ids."""

import re

import numpy as np
import pytest

import reshard
from reshard import P, errors

# A 2-process JAX job's ids for reshard's dense devices 0..7: JAX numbers each
# process's devices from process_index * 2048.
JAX_IDS = [0, 1, 2, 3, 2048, 2049, 2050, 2051]


def block_numbers(picture: str) -> list[int]:
    """Every number inside the blocks (the lines between borders), caption and headings left out."""
    return sorted(int(n) for line in picture.splitlines() if line.startswith("│") for n in re.findall(r"\d+", line))


def test_the_seeds_array_is_drawn_with_jax_ids_and_its_whole_dimension_named():
    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(8).reshape(2, 4), ("data", "model")),
                                     P(None, "data", "model"))
    picture = sharding.picture((32, 8, 4096), labels=JAX_IDS, dtype="bf16")
    lines = picture.splitlines()
    assert lines[0] == "[32, 8, 4096] bf16: dim 0 (32) whole; rows: dim 1 split 2, columns: dim 2 split 4"
    assert block_numbers(picture) == JAX_IDS  # each device once, by its JAX id
    # Row 1 holds dim 1's first half (process 0's devices), row 2 the second.
    divider = next(i for i, line in enumerate(lines) if line.startswith("├"))
    assert "CPU 3" in "\n".join(lines[:divider]) and "CPU 2048" in "\n".join(lines[divider:])
    assert len({len(line) for line in lines[1:]}) == 1  # a rectangle


def test_labels_may_be_ints_numpy_ints_or_strs_and_default_to_the_ids():
    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(8).reshape(2, 4), ("x", "r")), P("x"))
    for shape in [(8,), (8, 64), (8, 2, 2)]:
        assert sharding.picture(shape) == sharding.picture(shape, list(range(8)))
        assert sharding.picture(shape, np.array(JAX_IDS)) == sharding.picture(shape, [str(i) for i in JAX_IDS])
        assert "CPU 2048,2049,2050,2051" in sharding.picture(shape, JAX_IDS)
    tpu = sharding.picture((8,), [f"t{i}" for i in range(8)], platform="TPU", width=40)
    assert "TPU t0,t1,t2,t3" in tpu
    assert abs(max(len(line) for line in tpu.splitlines()) - 40) <= 2  # blocks' widths are rounded
    assert "\x1b[48;5;" in sharding.picture((8,), color=True)
    assert "\x1b" not in sharding.picture((8,))


def test_a_picture_exists_for_every_rank_unless_there_is_nothing_or_too_much_to_draw():
    mesh = reshard.Mesh(np.arange(4), ("x",))
    assert reshard.NamedSharding(mesh, P()).picture(()).splitlines()[0] == "[]: a scalar"
    assert "CPU 0,1,2,3" in reshard.NamedSharding(mesh, P()).picture((2, 3, 4, 5))
    assert reshard.NamedSharding(mesh, P("x")).picture((0, 4)) is None
    wide = reshard.NamedSharding(reshard.Mesh(np.arange(64), ("x",)), P(None, "x"))
    assert wide.picture((2, 64, 2)) is None


def test_bad_arguments_are_typed_errors_naming_the_argument():
    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(4), ("x",)), P("x"))
    cases = [
        (dict(global_shape=(8,), labels=[0, 1, 2]), "labels: device 3 has no label"),
        (dict(global_shape=(8,), labels="0123"), "labels: expected a sequence"),
        (dict(global_shape=(8,), labels=5), "labels: expected a sequence"),
        (dict(global_shape=(8,), labels=[0, 1, 2.5, 3]), "labels[2]: expected an int or a str, got float"),
        (dict(global_shape=(8,), labels=[0, 1, True, 3]), "labels[2]"),
        (dict(global_shape=(8,), labels=[0, "", 2, 3]), "labels[1]: empty"),
        (dict(global_shape=(8,), labels=[0, 1, "a\nb", 3]), "labels[2]"),
        (dict(global_shape=(8,), width=0), "width: 0 is not between 1 and 1000"),
        (dict(global_shape=(8,), width=10**30), f"width: {10**30} is not between"),
        (dict(global_shape=(8,), width=8.0), "width: expected an int, got float"),
        (dict(global_shape=(8,), color="yes"), "color: expected a bool"),
        (dict(global_shape=(8,), dtype=np.float32), "dtype: expected a str"),
        (dict(global_shape=(8,), platform=None), "platform: expected a str"),
        (dict(global_shape="8"), "global_shape: expected a sequence of ints"),
        (dict(global_shape=(8.0,)), "global_shape"),
        (dict(global_shape=(2**64,)), "global_shape"),
    ]
    for kwargs, message in cases:
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(message)):
            sharding.picture(**kwargs)
    with pytest.raises(errors.IndivisibleError, match="global_shape"):
        sharding.picture((6,))
    with pytest.raises(errors.RankError, match="global_shape"):
        reshard.NamedSharding(sharding.mesh, P(None, "x")).picture((8,))
