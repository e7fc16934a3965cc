"""Real Orbax checkpoints for the reshard.orbax tests, written by orbax-checkpoint itself from
JAX arrays on 8 of the forced CPU devices, in several layouts and every on-disk form Orbax
picks (OCDBT or array folders, zarr or zarr3, a CheckpointManager step). The saved values
are also written raw (values.json + .bin files), so processes without JAX can check bytes."""

from __future__ import annotations

import pathlib

import jax
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from orbax_raw import write_raw

# (folder name, how it is written): each a form Orbax 0.12 writes.
FORMS = {
    "standard": "StandardCheckpointer (OCDBT, zarr)",
    "folders": "PyTreeCheckpointHandler(use_ocdbt=False) (zarr folders)",
    "ocdbt-zarr3": "PyTreeCheckpointHandler(use_zarr3=True) (OCDBT, zarr3)",
    "folders-zarr3": "PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3=True)",
    "manager/7": "CheckpointManager step 7, item 'default' (StandardSave)",
}


def tree_values(gen: np.random.Generator) -> dict:
    """Big enough that OCDBT keeps most chunks out of its b-tree nodes (values over 1 KiB), with small
    leaves it keeps inline."""
    def f(*shape, dtype=np.float32):
        return gen.standard_normal(shape).astype(dtype)

    return {
        "params": {
            "embed": f(64, 64),
            "layers": [{"w": f(64, 96, dtype=ml_dtypes.bfloat16), "b": gen.integers(-9, 9, 24).astype(np.int64)},
                       {"w": f(64, 96, dtype=np.float16), "b": gen.integers(-9, 9, 24).astype(np.int64)}],
            "norm": f(16),
        },
        "mask": gen.integers(0, 2, (8, 12)).astype(np.bool_),
        "counts": gen.integers(0, 255, (12, 10)).astype(np.uint8),
        "step": np.int32(gen.integers(0, 1000)),
    }


def save_specs() -> dict:
    """The training layout: a (2, 4) mesh for the params, an 8-line for the rest."""
    return {
        "params": {"embed": ("grid", P("data", "model")),
                   "layers": [{"w": ("grid", P("model", "data")), "b": ("line", P("x"))},
                              {"w": ("grid", P(None, ("data", "model"))), "b": ("grid", P())}],
                   "norm": ("line", P("x"))},
        "mask": ("grid", P("data", "model")),
        "counts": None,  # a numpy leaf: Orbax saves it whole (np.ndarray)
        "step": None,  # a numpy scalar (Orbax's "scalar")
    }


def names_of(tree: dict, prefix: str = "") -> dict[str, np.ndarray]:
    out = {}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    for k, v in items:
        name = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, (dict, list)):
            out.update(names_of(v, name))
        else:
            out[name] = np.asarray(v)
    return out


def device_tree(values: dict, order: list[int]) -> dict:
    by_id = {d.id: d for d in jax.devices()}
    devices = np.array([by_id[d] for d in order], dtype=object)
    meshes = {"grid": Mesh(devices.reshape(2, 4), ("data", "model")), "line": Mesh(devices, ("x",))}

    def place(value, how):
        if how is None:
            return value
        mesh, spec = how
        return jax.device_put(value, NamedSharding(meshes[mesh], spec))

    return jax.tree_util.tree_map(place, values, save_specs(), is_leaf=lambda x: x is None or isinstance(x, tuple))


def save(form: str, folder: pathlib.Path, tree: dict) -> pathlib.Path:
    path = folder / form
    if form == "standard":
        with ocp.StandardCheckpointer() as c:
            c.save(path, tree)
    elif form.startswith("manager/"):
        with ocp.CheckpointManager(folder / "manager") as m:
            m.save(int(form.split("/")[1]), args=ocp.args.StandardSave(tree))
            m.wait_until_finished()
    else:
        handler = ocp.PyTreeCheckpointHandler(use_ocdbt=not form.startswith("folders"), use_zarr3="zarr3" in form)
        with ocp.Checkpointer(handler) as c:
            c.save(path, tree)
    return path


def write_all(folder: pathlib.Path, seed: int) -> tuple[dict[str, np.ndarray], dict[str, pathlib.Path]]:
    """Every form of FORMS from one tree (saved from a random device order); the raw values in folder/raw."""
    gen = np.random.default_rng(seed)
    values = tree_values(gen)
    order = [int(d) for d in gen.permutation(8)]
    tree = device_tree(values, order)
    paths = {form: save(form, folder, tree) for form in FORMS}
    flat = names_of(values)
    write_raw(folder / "raw", flat)
    return flat, paths
