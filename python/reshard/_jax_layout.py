"""What a Levanter or plain JAX checkpoint holds, learned from its own files.

JAX's ``GlobalAsyncCheckpointManager.serialize`` writes each array through
the TensorStore spec it is given; ``get_tensorstore_spec`` and Levanter build
two kinds:

- zarr3 arrays in an OCDBT database (its root manifest ``manifest.ocdbt``):
  Levanter's current layout puts every leaf of the training state in one
  database rooted at the step folder, under its tree path with '/'
  (``model/transformer/layers/stacked/self_attn/q_proj/weight``); JAX's own
  spec roots one at each array's parent folder.
- one zarr (v2) or zarr3 folder per array (``.zarray`` / ``zarr.json``):
  Levanter's previous layout, at ``<step>/model/transformer/.../weight``.

A leaf's name is its key with '/' read as '.', as reshard.orbax names
Orbax's leaves. Levanter writes ``metadata.json`` (step, timestamp) beside the
arrays once every one is committed: with it the folder is a Levanter
checkpoint; without it, a plain JAX one (or, where the tree is Levanter's, a
save that never finished).
"""

from __future__ import annotations

import json
import os
import pathlib

import tensorstore as ts

from ._orbax_layout import Item, Leaf, Place, Storage, folder_kvstore
from ._store_paths import StorePath, store_error
from .errors import FormatError, IncompleteCheckpointError, NotOrbaxCheckpointError, ReshardIOError

OCDBT_MANIFEST = "manifest.ocdbt"
LEVANTER_METADATA = "metadata.json"
ORBAX_METADATA = "_METADATA"
_ARRAY_FILES = {"zarr.json": "zarr3", ".zarray": "zarr"}
_METADATA_LIMIT = 1 << 20


def _files(folder: Place) -> list[str]:
    """Every file under `folder`, relative to it, '/'-separated."""
    if isinstance(folder, StorePath):
        return folder.relative_keys()
    found = []
    try:
        for root, _, names in os.walk(folder, onerror=_raise):
            rel = pathlib.Path(root).relative_to(folder).as_posix()
            found += [n if rel == "." else f"{rel}/{n}" for n in names]
    except OSError as e:
        raise ReshardIOError(f"{folder}: cannot list the folder: {e.strerror or e}") from e
    return sorted(found)


def _raise(e: OSError) -> None:
    raise e


def _split(key: str) -> tuple[str, str]:
    """(folder, file name) of a '/'-separated key."""
    head, _, tail = key.rpartition("/")
    return head, tail


def _database_arrays(folder: Place, root: str) -> list[Storage]:
    """The arrays of the OCDBT database at `root`, from the keys of their metadata."""
    spec = {"driver": "ocdbt", "base": folder_kvstore(folder, root)}
    try:
        keys = ts.KvStore.open(spec).result().list().result()
    except ValueError as e:
        where = f"{folder / root if root else folder}: the OCDBT database"
        if isinstance(folder, StorePath):
            raise store_error(where, e) from None
        raise FormatError(f"{where} cannot be read: {e}") from e
    arrays = []
    for raw in keys:
        head, tail = _split(raw.decode("utf-8", errors="surrogateescape"))
        if tail in _ARRAY_FILES:
            arrays.append(Storage(_ARRAY_FILES[tail], head, root))
    return arrays


def _name(stored: Storage) -> str:
    parts = [p for p in (stored.ocdbt_root, stored.key) if p]
    return "/".join(parts).replace("/", ".") or "_"


def _step(folder: Place) -> int:
    where = folder / LEVANTER_METADATA
    try:
        data = where.read_bytes()
        if len(data) > _METADATA_LIMIT:
            raise FormatError(f"{where}: {len(data)} bytes is too large for Levanter's checkpoint metadata")
        metadata = json.loads(data.decode("utf-8"))
    except OSError as e:
        raise ReshardIOError(f"{where}: cannot read Levanter's checkpoint metadata: {e.strerror or e}") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{where}: Levanter's checkpoint metadata is not JSON ({e})") from e
    step = metadata.get("step") if isinstance(metadata, dict) else None
    if isinstance(step, bool) or not isinstance(step, int):
        raise FormatError(f"{where}: Levanter's checkpoint metadata has no integer 'step'")
    return step


def scan(folder: Place) -> Item | None:
    """The Levanter or JAX checkpoint at `folder`, or None where it holds no zarr array nor OCDBT database."""
    files = _files(folder)
    if any(_split(f)[1] == ORBAX_METADATA for f in files):
        return None  # Orbax items further down (a CheckpointManager's folder of steps): not JAX's arrays
    steps = sorted({f.split("/")[0] for f in files if f.count("/") == 1 and f.endswith("/" + LEVANTER_METADATA)})
    if steps and LEVANTER_METADATA not in files:
        raise NotOrbaxCheckpointError(f"{folder} is a Levanter run's folder of steps {steps}: pass one step's "
                                      f"folder (such as {folder / steps[-1]})")
    roots = [_split(f)[0] for f in files if _split(f)[1] == OCDBT_MANIFEST]
    inside = tuple(r + "/" for r in roots if r)
    stored = [s for r in roots for s in _database_arrays(folder, r)]
    for f in files:
        head, tail = _split(f)
        if tail in _ARRAY_FILES and head and not (head + "/").startswith(inside):
            stored.append(Storage(_ARRAY_FILES[tail], head, None))
    if not stored:
        return None
    leaves = sorted((Leaf(_name(s), tuple(_name(s).split(".")), "jax.Array", s) for s in stored),
                    key=lambda leaf: leaf.name)
    names = {leaf.name for leaf in leaves}
    if len(names) != len(leaves):
        raise FormatError(f"{folder}: two arrays have one tree path once '/' is read as '.'")
    use_ocdbt = sum(s.ocdbt_root is not None for s in stored) * 2 >= len(stored)
    use_zarr3 = sum(s.driver == "zarr3" for s in stored) * 2 >= len(stored)
    if LEVANTER_METADATA in files:
        return Item(folder, use_ocdbt, use_zarr3, tuple(leaves), "levanter", _step(folder))
    if "step" in names and any(n.startswith("model.") for n in names):
        raise IncompleteCheckpointError(
            f"{folder}: a Levanter training state (step, model...) without {LEVANTER_METADATA}, which Levanter "
            "writes once every array is committed: a save that did not finish")
    return Item(folder, use_ocdbt, use_zarr3, tuple(leaves), "jax")
