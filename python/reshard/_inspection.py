"""reshard.inspect and reshard.verify: the command line's ``reshard inspect --json`` and
``reshard verify`` as Python values, over the same C++ readers."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

from . import _core
from ._paths import fspath as _fspath
from .errors import ReshardError, UnfinishedUploadsWarning

__all__ = ["inspect", "verify"]


def inspect(path: str | os.PathLike) -> dict[str, Any]:
    """What a .safetensors file, a Hugging Face or PEFT folder, or a reshard checkpoint holds: local, or
    ``s3://BUCKET/KEY`` / ``gs://BUCKET/KEY`` (read by byte ranges: headers only).

    A dict as ``reshard inspect --json`` prints it: ``format`` ('safetensors',
    'hf', 'peft' or 'checkpoint'), ``metadata`` (str to str, or None) and
    ``tensors``, one dict per tensor with ``name``, ``dtype`` (reshard's name,
    e.g. 'bf16'), ``shape``, ``bytes`` and its ``file`` (a checkpoint's: its
    ``layout`` and ``chunks``, each with its ``box`` as slices, ``file``,
    ``offset`` and ``length``). Headers are validated; no tensor data is read.
    What killed writers left beside `path` is pointed out, as the command does
    (see ``verify``).
    """
    return _noting_unfinished_uploads(_fspath(path, "path"), _core._inspect)


def verify(path: str | os.PathLike) -> dict[str, Any]:
    """Checks `path` completely, as ``reshard verify``: every header rule, the index or
    manifest, every checksum, every tensor's bytes read back (from a store too: ``s3://``, ``gs://``).

    Returns a summary dict (``format``, ``files``, ``tensors``, ``bytes``); the
    first damage raises its typed error naming the file and tensor
    (ChecksumMismatchError for a checkpoint's damaged bytes).

    What killed writers left beside `path` (a local writer's staging, a
    store's unfinished uploads under it) is pointed out, never removed: the
    dict's ``unfinished_uploads`` lists it and an ``UnfinishedUploadsWarning``
    says so, or, where the call fails, a note on its error does.
    """
    return _noting_unfinished_uploads(_fspath(path, "path"), _core._verify)


def _noting_unfinished_uploads(path: str, read: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    left = _core._unfinished_uploads(path)
    try:
        found = read(path)
    except ReshardError as e:
        if left:
            e.add_note(_note(path, left))
        raise
    if left:
        found["unfinished_uploads"] = left
        warnings.warn(_note(path, left), UnfinishedUploadsWarning, stacklevel=3)
    return found


def _note(path: str, left: list[str]) -> str:
    """The command line's note (src/cli/unfinished_uploads.cpp), in the same words."""
    in_store = "://" in path
    return (f"{path}: {len(left)} unfinished upload{'' if len(left) == 1 else 's'} beside it, left by writers "
            f"that were killed{' (or still running: the store cannot tell)' if in_store else ''}: "
            f"{', '.join(left)}; the next write of the same destination removes them")
