"""reshard.inspect and reshard.verify: the command line's ``reshard inspect --json`` and
``reshard verify`` as Python values, over the same C++ readers."""

from __future__ import annotations

import os
from typing import Any

from . import _core
from ._paths import fspath as _fspath

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
    """
    return _core._inspect(_fspath(path, "path"))


def verify(path: str | os.PathLike) -> dict[str, Any]:
    """Checks `path` completely, as ``reshard verify``: every header rule, the index or
    manifest, every checksum, every tensor's bytes read back (from a store too: ``s3://``, ``gs://``).

    Returns a summary dict (``format``, ``files``, ``tensors``, ``bytes``); the
    first damage raises its typed error naming the file and tensor
    (ChecksumMismatchError for a checkpoint's damaged bytes).
    """
    return _core._verify(_fspath(path, "path"))
