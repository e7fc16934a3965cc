"""Which checkpoint a folder is, recognised from its own files, and the subtree of it that is read.

reshard.orbax reads three kinds through TensorStore: Orbax PyTree items
(``_orbax_layout``), Levanter checkpoints and the plain JAX
``GlobalAsyncCheckpointManager`` folders they are made of (``_jax_layout``).
A folder that is none of them is refused saying what each needs.
"""

from __future__ import annotations

import dataclasses
import os

from . import _jax_layout
from . import _orbax_layout as _layout
from ._store_paths import path_of
from .errors import MissingTensorError, NotOrbaxCheckpointError

KINDS = (f"an Orbax PyTree item has {_layout.METADATA_FILE} (a CheckpointManager step folder holds such items); "
         f"a Levanter checkpoint has {_jax_layout.LEVANTER_METADATA} beside its arrays, zarr3 in an OCDBT database "
         f"({_jax_layout.OCDBT_MANIFEST}) or zarr folders (.zarray); a JAX GlobalAsyncCheckpointManager folder "
         "holds zarr or zarr3 arrays (.zarray, zarr.json) or OCDBT databases")


def _none_of(folder: _layout.Place) -> NotOrbaxCheckpointError:
    hint = str(_layout.not_orbax(folder))
    if "no _METADATA" not in hint:  # a folder of steps, or an older Orbax format: said as is
        return NotOrbaxCheckpointError(hint)
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        names = []
    steps = sorted(n for n in names if n.startswith("step-") and n[5:].isdigit())
    if steps:
        return NotOrbaxCheckpointError(f"{folder} is a Levanter run's folder of steps {steps}: pass one step's "
                                       f"folder (such as {folder / steps[-1]})")
    ours = " (its manifest.json makes it a reshard checkpoint: reshard.restore_checkpoint reads it)" \
        if "manifest.json" in names else ""
    return NotOrbaxCheckpointError(f"{folder} is not a checkpoint reshard.orbax reads: it has no _METADATA, no "
                                   f"{_jax_layout.LEVANTER_METADATA} and no arrays{ours}. "
                                   f"{KINDS[0].upper()}{KINDS[1:]}")


def open_item(path: str | os.PathLike, item: str | None = None) -> _layout.Item:
    """The checkpoint at `path`, whichever of the known kinds it is (`item` chooses an Orbax step's item)."""
    folder = path_of(path, "path")
    found = _layout.item_folder(folder, item)
    if found is not None:
        return _layout.read_item(found)
    scanned = _jax_layout.scan(folder)
    if scanned is None:
        raise _none_of(folder)
    return scanned


def default_subtree(item: _layout.Item) -> str:
    """The subtree read when the caller names none: a Levanter training state's model."""
    return "model" if item.kind == "levanter" else ""


def _subtrees(item: _layout.Item) -> list[str]:
    tops = {leaf.keys[0] for leaf in item.leaves if len(leaf.keys) > 1}
    models = {leaf.name[:leaf.name.index(".model.") + 6] for leaf in item.leaves if ".model." in leaf.name}
    return sorted(tops | models)


def select(item: _layout.Item, subtree: str | None) -> _layout.Item:
    """`item` with only the leaves under the key path `subtree` (dotted), that prefix taken off their names;
    None chooses ``default_subtree``, "" the whole tree."""
    if subtree is None:
        subtree = default_subtree(item)
    if not subtree:
        return item
    prefix = subtree.strip(".") + "."
    depth = prefix.count(".")
    chosen = tuple(dataclasses.replace(leaf, name=leaf.name[len(prefix):], keys=leaf.keys[depth:],
                                       storage=item.storage(leaf))
                   for leaf in item.leaves if leaf.name.startswith(prefix))
    if not chosen:
        default = " (the default for a Levanter checkpoint; '' reads the whole tree)" \
            if subtree == default_subtree(item) else ""
        raise MissingTensorError(f"subtree: {item.folder} has no leaves under {subtree!r}{default}; its subtrees "
                                 f"are {_subtrees(item)}")
    return dataclasses.replace(item, leaves=chosen)
