"""reshard.orbax against real Orbax checkpoints (orbax-checkpoint writes them here, from JAX
on 8 of the forced CPU devices, in every form of orbax_cases.FORMS): restored onto other
layouts (reshard's and JAX's) every byte equals the saved arrays, inspect reports what
Orbax wrote, and each kind of bad input is its typed error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import Mesh as JaxMesh, NamedSharding as JaxSharding, PartitionSpec as JaxP

import orbax_cases
import reshard
import reshard.orbax as ro
from conftest import SEED
from reshard import P, errors


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("orbax")
    values, paths = orbax_cases.write_all(folder, SEED)
    return folder, values, paths


def random_target(rng, shape, devices):
    """A random layout of `shape` over a random order of `devices`: each dimension split over an axis
    that divides it, or not."""
    order = rng.sample(devices, len(devices))
    sizes = rng.choice([(len(order),), (2, len(order) // 2), (len(order) // 2, 2)])
    names = ("u", "v")[:len(sizes)]
    mesh = reshard.Mesh(np.array(order).reshape(sizes), names)
    free = list(zip(names, sizes))
    rng.shuffle(free)
    spec = []
    for n in shape:
        fits = [a for a in free if n % a[1] == 0]
        if fits and rng.random() < 0.7:
            free.remove(fits[0])
            spec.append(fits[0][0])
        else:
            spec.append(None)
    return reshard.NamedSharding(mesh, P(*spec))


def wrong_shards(arrays, values):
    return [f"{n} on {s.device}" for n, a in arrays.items() for s in a.shards
            if s.data.tobytes() != values[n][s.index].tobytes() or s.data.dtype != values[n].dtype]


@pytest.mark.parametrize("form", list(orbax_cases.FORMS))
def test_restore_onto_other_layouts_every_byte(saved, rng, form):
    _, values, paths = saved
    devices = rng.choice([list(range(8)), [7, 5, 3, 1], list(range(8, 16))])
    targets = {n: random_target(rng, v.shape, devices) for n, v in values.items()}
    print(form, {n: str(t) for n, t in targets.items()})
    arrays, stats = ro.restore_with_result(paths[form], targets)
    assert list(arrays) == list(targets)
    assert not wrong_shards(arrays, values)
    assert all(arrays[n].sharding == targets[n] for n in targets)
    assert stats.tensors == len(values) and stats.bytes_read > 0
    # The whole tree onto one mesh by rules and best effort, nested targets, and one sharding for all.
    mesh = reshard.Mesh(np.array(devices), ("x",))
    by_rules = ro.restore(paths[form], mesh, rules=[("params.layers.*.w", P(None, "x"))], best_effort="x")
    assert not wrong_shards(by_rules, values)
    assert by_rules["params.layers.1.w"].sharding.spec == P(None, "x")
    assert by_rules["params.embed"].sharding.spec == P(None, "x")  # the last dimension x divides
    nested = ro.restore(paths[form], {"params": {"layers": [{"w": targets["params.layers.0.w"]}]}})
    assert not wrong_shards({"params.layers.0.w": nested["params"]["layers"][0]["w"]}, values)
    one = reshard.NamedSharding(reshard.Mesh([devices[-1]], ("d",)), P())
    assert not wrong_shards(ro.restore(paths[form], one), values)


def test_rules_are_the_ones_convert_and_import_follow(saved):
    """reshard.convert's layout rules (the same C++ ones): a rules file's text or (glob, spec) pairs, the
    first matching rule that fits the rank, then best effort for what no rule lays out."""
    _, values, paths = saved
    mesh = reshard.Mesh(list(range(4)), ("x",))
    text = "# weights by their columns, the rest by rows\nparams.layers.*.w None,x\n* x,None\n"
    got = ro.restore(paths["standard"], mesh, rules=text, best_effort="x")
    assert not wrong_shards(got, values)
    assert got["params.layers.0.w"].sharding.spec == P(None, "x")
    assert got["params.embed"].sharding.spec == P("x", None)
    # Rank 1: "x,None" is longer, so it passes to best effort (the last dimension x divides).
    assert got["params.norm"].sharding.spec == P("x") and got["params.layers.1.b"].sharding.spec == P("x")
    assert got["step"].sharding.spec == P()
    pairs = ro.restore(paths["standard"], mesh, rules=[("params.layers.*.w", P(None, "x")), ("*", ("x", None))],
                       best_effort="x")
    assert {n: a.sharding for n, a in pairs.items()} == {n: a.sharding for n, a in got.items()}
    with pytest.raises(errors.UnknownAxisError, match="best_effort: .*'y'"):
        ro.restore(paths["standard"], mesh, best_effort="y")
    with pytest.raises(errors.ParseError, match="rules: line 2"):
        ro.restore(paths["standard"], mesh, rules="* x\nno-spec\n")


def test_restore_into_jax_arrays(saved, rng):
    _, values, paths = saved
    by_id = {d.id: d for d in jax.devices()}
    order = rng.sample(range(8), 8)
    grid = JaxMesh(np.array([by_id[d] for d in order], dtype=object).reshape(4, 2), ("a", "b"))
    line = JaxMesh(np.array([by_id[d] for d in order[:4]], dtype=object), ("x",))
    want = {"params": {"embed": JaxSharding(grid, JaxP("b", "a")),
                       "layers": [{"w": JaxSharding(line, JaxP(None, "x"))},
                                  {"b": jax.ShapeDtypeStruct((24,), np.int64, sharding=JaxSharding(grid, JaxP("a")))}]},
            "step": JaxSharding(line, JaxP())}
    got = ro.restore(paths["standard"], want)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(
        want, is_leaf=lambda x: isinstance(x, jax.ShapeDtypeStruct))
    leaves = {"params.embed": got["params"]["embed"], "params.layers.0.w": got["params"]["layers"][0]["w"],
              "params.layers.1.b": got["params"]["layers"][1]["b"], "step": got["step"]}
    for name, x in leaves.items():
        assert np.asarray(x).tobytes() == values[name].tobytes() and x.dtype == values[name].dtype, name
        for shard in x.addressable_shards:
            assert np.asarray(shard.data).tobytes() == values[name][shard.index].tobytes(), name
    assert got["params"]["embed"].sharding == want["params"]["embed"]
    with pytest.raises(errors.InvalidArgumentError, match="shape"):
        ro.restore(paths["standard"], {"params": {"norm": jax.ShapeDtypeStruct((8,), np.float32,
                                                                               sharding=JaxSharding(line, JaxP()))}})


def test_inspect_reports_what_orbax_wrote(saved):
    folder, values, paths = saved
    for form, path in paths.items():
        found = ro.inspect(path)
        assert found.use_ocdbt == (not form.startswith("folders")), form
        assert found.driver == ("zarr3" if "zarr3" in form else "zarr"), form
        assert list(found.tensors) == sorted(values)  # Orbax lists leaves by sorted tree path
        for name, t in found.tensors.items():
            assert t.shape == values[name].shape and np.dtype(t.dtype) == values[name].dtype, (form, name)
        # Orbax's chunks are its shards' shapes: embed on the (2, 4) mesh, P("data", "model").
        assert found.tensors["params.embed"].chunks == (32, 16), form
        assert found.tensors["params.embed"].keys == ("params", "embed")
    assert ro.inspect(folder / "manager" / "7", item="default").path.endswith("default")
    assert "zarr in OCDBT" in str(ro.inspect(paths["standard"]))


def test_command_line(saved, tmp_path):
    _, values, paths = saved
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "reshard.orbax", "inspect", str(paths["folders-zarr3"]), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert listed["driver"] == "zarr3" and listed["tensors"]["params.norm"]["shape"] == [16]
    from reshard import _orbax_cli

    with pytest.raises(SystemExit):
        _orbax_cli.main(["--help"])
    assert _orbax_cli.main(["convert", str(paths["manager/7"]), str(tmp_path / "ckpt")]) == 0
    back = reshard.restore_checkpoint(tmp_path / "ckpt", {n: reshard.NamedSharding(reshard.Mesh([2, 0], ("x",)), P())
                                                          for n in values})
    assert not wrong_shards(back, values)
    assert _orbax_cli.main(["inspect", str(tmp_path)]) == 1  # not Orbax's: an error line, not a traceback


def test_errors_by_name(saved, tmp_path):
    folder, values, paths = saved
    one = reshard.NamedSharding(reshard.Mesh([0], ("d",)), P())
    with pytest.raises(errors.NotOrbaxCheckpointError, match="no _METADATA"):
        ro.inspect(tmp_path)
    reshard.save_checkpoint({"w": reshard.from_host(np.zeros(4, np.float32), one)}, tmp_path / "ours")
    with pytest.raises(errors.NotOrbaxCheckpointError):
        ro.restore(tmp_path / "ours", one)
    with pytest.raises(errors.NotOrbaxCheckpointError, match=r"steps \[7\]"):
        ro.inspect(folder / "manager")
    with pytest.raises(errors.ReshardIOError):
        ro.inspect(tmp_path / "nowhere")
    with pytest.raises(errors.MissingTensorError, match="params.nothing"):
        ro.restore(paths["standard"], {"params.nothing": one})
    with pytest.raises(errors.IndivisibleError, match="tensor 'params.norm'"):
        ro.restore(paths["standard"], reshard.Mesh([0, 1, 2], ("x",)), rules=[("*.norm", P("x"))])
    with pytest.raises(errors.InvalidArgumentError, match="named twice"):
        ro.restore(paths["standard"], {"params.norm": one, "params": {"norm": one}})

    # A save that never committed: no commit marker, or still under Orbax's temporary name.
    uncommitted = tmp_path / "uncommitted"
    shutil.copytree(paths["folders"], uncommitted)
    (uncommitted / "commit_success.txt").unlink()
    with pytest.raises(errors.IncompleteCheckpointError, match="commit_success.txt"):
        ro.restore(uncommitted, one)
    temporary = tmp_path / "3.orbax-checkpoint-tmp-1234"
    shutil.copytree(paths["manager/7"], temporary)
    with pytest.raises(errors.IncompleteCheckpointError, match="orbax-checkpoint-tmp"):
        ro.inspect(temporary)

    # Damaged array data: a chunk gone, or cut short.
    damaged = tmp_path / "damaged"
    shutil.copytree(paths["folders"], damaged)
    (damaged / "params.embed" / "0.0").unlink()
    with pytest.raises(errors.ReshardIOError, match="params.embed.*missing"):
        ro.restore(damaged, one)
    (damaged / "params.norm" / "0").write_bytes((damaged / "params.norm" / "0").read_bytes()[:9])
    with pytest.raises(errors.FormatError, match="params.norm"):
        ro.restore(damaged, {"params.norm": one})

    # An array format reshard does not read: n5's metadata in an array folder, or a format flag it does not know.
    other = tmp_path / "n5"
    shutil.copytree(paths["folders"], other)
    (other / "params.norm" / ".zarray").rename(other / "params.norm" / "attributes.json")
    with pytest.raises(errors.UnsupportedDriverError, match="params.norm"):
        ro.restore(other, {"params.norm": one})
    metadata = json.loads((other / "_METADATA").read_text())
    metadata["use_zarr3"] = "zarr4"
    (other / "_METADATA").write_text(json.dumps(metadata))
    with pytest.raises(errors.UnsupportedDriverError, match="use_zarr3"):
        ro.inspect(other)
    (other / "_METADATA").write_text("{not json")
    with pytest.raises(errors.NotOrbaxCheckpointError, match="not JSON"):
        ro.inspect(other)


def test_a_dtype_reshard_lacks_and_leaves_that_are_not_arrays_are_named(tmp_path):
    import orbax.checkpoint as ocp

    tree = {"ok": np.arange(4, dtype=np.float32), "z": np.arange(3).astype(np.complex128), "s": "text", "n": None}
    with ocp.PyTreeCheckpointer() as c:
        c.save(tmp_path / "c", tree)
    one = reshard.NamedSharding(reshard.Mesh([0], ("d",)), P())
    found = ro.inspect(tmp_path / "c").tensors
    assert found["z"].dtype == "complex128" and found["s"].value_type == "string" and found["s"].shape is None
    with pytest.raises(errors.UnsupportedDtypeError, match="'z'"):
        ro.restore(tmp_path / "c", one)
    with pytest.raises(errors.UnsupportedError, match="'s' is an Orbax string"):
        ro.restore(tmp_path / "c", {"s": one})
    assert reshard.to_host(ro.restore(tmp_path / "c", {"ok": one})["ok"]).tobytes() == tree["ok"].tobytes()
