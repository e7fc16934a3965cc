"""What an Orbax PyTree checkpoint holds on disk, learned from its own files.

Orbax (``orbax-checkpoint`` 0.12) writes a PyTree item as a folder with
``_METADATA`` (JSON: each leaf's tree path as key entries, its value type,
and whether OCDBT and zarr3 were used), ``_CHECKPOINT_METADATA`` and, once
committed, ``commit_success.txt`` (a save in progress is a folder whose name
carries ``.orbax-checkpoint-tmp``). Each array is a TensorStore array named by
its keys joined by dots: a zarr (v2) or zarr3 array either in a folder of that
name, or, with OCDBT, under that key of the OCDBT database whose root manifest
is ``manifest.ocdbt`` (the per-process databases ``ocdbt.process_N`` hold the
data files it points into). A CheckpointManager's step folder holds one such
folder per item (``default`` for a single item).

A checkpoint may be in an object store (``s3://``, ``gs://``): its folder is
then a ``_store_paths.StorePath``, which answers the same questions as a
``pathlib.Path`` by asking the store, and its arrays' specs use TensorStore's
``s3`` and ``gcs`` kvstore drivers.

Nothing here reads array data: the specs built here are opened by
reshard.orbax, which reads only the boxes each process needs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any

from ._store_paths import StorePath, path_of
from .errors import (IncompleteCheckpointError, InvalidArgumentError, NotOrbaxCheckpointError, ObjectNotFoundError,
                     ReshardError, ReshardIOError, UnsupportedDriverError)

# A folder or file: local, or an object store's.
Place = pathlib.Path | StorePath

TMP_SUFFIX = ".orbax-checkpoint-tmp"
COMMIT_FILE = "commit_success.txt"
METADATA_FILE = "_METADATA"
ARRAY_VALUE_TYPES = ("jax.Array", "np.ndarray", "scalar")
_METADATA_LIMIT = 256 << 20  # a tree of a million leaves stays far below this


@dataclasses.dataclass(frozen=True)
class Storage:
    """Where one array is stored under its checkpoint folder: its format (zarr or zarr3), its key, and the
    folder of the OCDBT database holding it ("" for the checkpoint folder itself; None: an array folder,
    the key its path)."""

    driver: str
    key: str
    ocdbt_root: str | None


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of the saved tree: its tensor name (keys joined by dots), keys and value type, and where
    it is stored (None: where Orbax's _METADATA flags put it, under its name)."""

    name: str
    keys: tuple[str, ...]
    value_type: str
    storage: Storage | None = None

    @property
    def is_array(self) -> bool:
        return self.value_type in ARRAY_VALUE_TYPES


@dataclasses.dataclass(frozen=True)
class Item:
    """A committed checkpoint folder and its leaves: an Orbax PyTree item (as its _METADATA says), or a
    Levanter or JAX checkpoint (``_jax_layout``; `use_ocdbt` and `use_zarr3` then say how most of its
    arrays are stored)."""

    folder: Place
    use_ocdbt: bool
    use_zarr3: bool
    leaves: tuple[Leaf, ...]
    kind: str = "orbax"  # "orbax", "levanter" or "jax"
    step: int | None = None

    @property
    def driver(self) -> str:
        return "zarr3" if self.use_zarr3 else "zarr"

    def leaf(self, name: str) -> Leaf | None:
        return next((x for x in self.leaves if x.name == name), None)

    def storage(self, leaf: Leaf) -> Storage:
        if leaf.storage is not None:
            return leaf.storage
        return Storage(self.driver, leaf.name, "" if self.use_ocdbt else None)

    def spec(self, leaf: Leaf) -> dict[str, Any]:
        """The TensorStore spec that opens `leaf` for reading, as Orbax's (or JAX's) own read spec builds it."""
        stored = self.storage(leaf)
        if stored.ocdbt_root is None:
            kvstore = folder_kvstore(self.folder, stored.key)
        else:
            kvstore = {"driver": "ocdbt", "base": folder_kvstore(self.folder, stored.ocdbt_root), "path": stored.key,
                       "cache_pool": "cache_pool#ocdbt"}
        # A missing chunk is damage (Orbax and JAX store chunks equal to the fill value too), not zeros.
        return {"driver": stored.driver, "kvstore": kvstore, "recheck_cached_data": False,
                "recheck_cached_metadata": False, "fill_missing_data_reads": False}


def folder_kvstore(folder: Place, under: str = "") -> dict[str, Any]:
    """The kvstore spec of the folder `under` (relative, "" for `folder` itself) of `folder`, its path
    ending in '/' (TensorStore joins keys literally)."""
    place = folder / under if under else folder
    if isinstance(place, StorePath):
        return place.kvstore(folder=True)
    return {"driver": "file", "path": str(place.resolve()) + "/"}


def _read_json(path: Place, what: str) -> Any:
    try:
        if isinstance(path, pathlib.Path):
            size = path.stat().st_size
            if size > _METADATA_LIMIT:
                raise NotOrbaxCheckpointError(f"{path}: {size} bytes is too large for Orbax's {what}")
        data = path.read_bytes()
        if len(data) > _METADATA_LIMIT:
            raise NotOrbaxCheckpointError(f"{path}: {len(data)} bytes is too large for Orbax's {what}")
        return json.loads(data.decode("utf-8"))
    except ReshardError:
        raise
    except OSError as e:
        raise ReshardIOError(f"{path}: cannot read Orbax's {what}: {e.strerror or e}") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NotOrbaxCheckpointError(f"{path}: Orbax's {what} is not JSON ({e})") from e


def _check_committed(folder: Place, step: Place | None) -> None:
    for part in (folder, step):
        if part is not None and TMP_SUFFIX in part.name:
            raise IncompleteCheckpointError(
                f"{part}: a checkpoint Orbax is still writing (or never finished): its name carries {TMP_SUFFIX!r}")
    markers = [folder / COMMIT_FILE] + ([step / COMMIT_FILE] if step is not None else [])
    if not any(m.is_file() for m in markers):
        raise IncompleteCheckpointError(
            f"{folder}: no {COMMIT_FILE}, so Orbax never committed this checkpoint (a save that did not finish)")


def _items_of(step: Place) -> list[str]:
    if isinstance(step, StorePath):  # one listing, not a request per folder
        return step.folders_holding(METADATA_FILE)
    try:
        return sorted(p.name for p in step.iterdir() if p.is_dir() and (p / METADATA_FILE).is_file())
    except OSError as e:
        raise ReshardIOError(f"{step}: cannot list the folder: {e.strerror or e}") from e


def not_orbax(folder: Place) -> NotOrbaxCheckpointError:
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        names = []
    steps = sorted((int(n) for n in names if n.isdigit()))
    if steps:
        return NotOrbaxCheckpointError(
            f"{folder} is a CheckpointManager's folder of steps {steps}: pass one step's folder "
            f"(such as {folder / str(steps[-1])})")
    if "checkpoint" in names:
        return NotOrbaxCheckpointError(
            f"{folder}: a msgpack 'checkpoint' file without {METADATA_FILE} is an older Orbax/Flax format "
            "reshard does not read")
    return NotOrbaxCheckpointError(f"{folder} is not an Orbax PyTree checkpoint: it has no {METADATA_FILE}")


def locate(path: str | os.PathLike, item: str | None = None) -> Place:
    """The committed item folder of `path` (an item folder, or a step folder with `item`, or its only item):
    local, or in an object store (``s3://``, ``gs://``)."""
    folder = path_of(path, "path")
    found = item_folder(folder, item)
    if found is None:
        raise not_orbax(folder)
    return found


def item_folder(folder: Place, item: str | None = None) -> Place | None:
    """``locate``'s item folder of `folder`, or None where it holds no Orbax item (and `item` names none)."""
    has_metadata = item is None and (folder / METADATA_FILE).is_file()
    if not has_metadata and not folder.is_dir():
        if isinstance(folder, StorePath):
            raise ObjectNotFoundError(f"{folder}: no such folder (path): no objects under it")
        raise ReshardIOError(f"{folder}: no such folder (path)")
    if has_metadata:
        step = folder.parent if (folder.parent / COMMIT_FILE).is_file() or TMP_SUFFIX in folder.parent.name else None
        _check_committed(folder, step)
        return folder
    items = _items_of(folder)
    if item is not None:
        if item not in items:
            raise InvalidArgumentError(f"{folder} has no Orbax item {item!r} (item); it has {items}")
        chosen = item
    elif len(items) == 1:
        chosen = items[0]
    elif items:
        raise InvalidArgumentError(f"{folder} is a step folder with items {items}: name one (item)")
    else:
        return None
    _check_committed(folder / chosen, folder)
    return folder / chosen


def _leaf_of(key: str, entry: Any, where: Place) -> Leaf:
    if not isinstance(entry, dict) or not isinstance(entry.get("key_metadata"), list):
        raise NotOrbaxCheckpointError(f"{where}: tree entry {key} has no key_metadata list")
    keys = []
    for k in entry["key_metadata"]:
        if not isinstance(k, dict) or "key" not in k:
            raise NotOrbaxCheckpointError(f"{where}: tree entry {key} has a key without 'key'")
        keys.append(str(k["key"]))
    value = entry.get("value_metadata")
    value_type = value.get("value_type") if isinstance(value, dict) else None
    if not isinstance(value_type, str):
        raise NotOrbaxCheckpointError(f"{where}: tree entry {key} has no value_type")
    return Leaf(".".join(keys) or "_", tuple(keys), value_type)


def _flag(metadata: dict[str, Any], key: str, where: Place) -> bool:
    value = metadata.get(key, False)
    if not isinstance(value, bool):
        raise UnsupportedDriverError(f"{where}: {key} is {value!r}; reshard reads zarr or zarr3 arrays, "
                                     "in OCDBT or in folders")
    return value


def read_item(folder: Place) -> Item:
    """The Item of a committed item folder, from its _METADATA."""
    where = folder / METADATA_FILE
    metadata = _read_json(where, "tree metadata")
    tree = metadata.get("tree_metadata") if isinstance(metadata, dict) else None
    if not isinstance(tree, dict):
        raise NotOrbaxCheckpointError(f"{where} has no tree_metadata: not an Orbax PyTree checkpoint")
    leaves = tuple(_leaf_of(key, entry, where) for key, entry in tree.items())
    seen: set[str] = set()
    for leaf in leaves:
        if leaf.name in seen:
            raise InvalidArgumentError(f"{where}: tree paths name {leaf.name!r} twice once keys are joined by dots")
        seen.add(leaf.name)
    return Item(folder, _flag(metadata, "use_ocdbt", where), _flag(metadata, "use_zarr3", where), leaves)
