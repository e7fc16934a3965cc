"""Hugging Face folders: a model's ``model.safetensors``, or its index and files, or a PEFT adapter;
local, or a prefix in an object store (``s3://BUCKET/KEY``, ``gs://BUCKET/KEY``, read by byte ranges).

Every file and the index are validated together when the folder is opened.
Tensors are read as in reshard.safetensors: read-only views of the files' maps
(``mmap``), or fresh arrays (``pread``, or ``copy=True``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from . import _core
from .safetensors import SafeOpen
from ._paths import fspath as _fspath

__all__ = ["Folder", "load_folder", "open_folder"]


class Folder:
    """An open, validated Hugging Face folder: ``keys()``, ``get_tensor``, ``metadata()``."""

    def __init__(self, path: str | os.PathLike, mode: str = "mmap") -> None:
        self._folder = _core.HfFolder.open(_fspath(path, "path"), mode)
        self._files = [SafeOpen._from_core(f) for f in self._folder.files]
        self._file_of = self._folder.tensor_files

    @property
    def kind(self) -> str:
        """'single_file', 'indexed' or 'peft_adapter'."""
        return self._folder.kind

    @property
    def file_names(self) -> list[str]:
        """The weight files, relative to the folder."""
        return self._folder.file_names

    def keys(self) -> list[str]:
        """Tensor names in source order: file by file, in data order within each."""
        return list(self._file_of)

    def __iter__(self) -> Iterator[str]:
        return iter(self._file_of)

    def __len__(self) -> int:
        return len(self._file_of)

    def __contains__(self, name: object) -> bool:
        return name in self._file_of

    def metadata(self) -> dict[str, str] | None:
        """The files' ``__metadata__`` merged in file order (the first value of a key wins)."""
        return self._folder.metadata

    def file_of(self, name: str) -> str:
        """The name of the file holding tensor `name` (MissingTensorError if none)."""
        return self._folder.file_names[self._index_of(name)]

    def get_tensor(self, name: str, copy: bool = False) -> np.ndarray:
        """Tensor `name` as a numpy array (a read-only view in mmap mode unless `copy`)."""
        return self._files[self._index_of(name)].get_tensor(name, copy)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.get_tensor(name)

    def _index_of(self, name: str) -> int:
        try:
            return self._file_of[name]
        except KeyError:
            from .errors import MissingTensorError

            raise MissingTensorError(f"{self._folder.folder}: no tensor named {name!r}") from None


def open_folder(path: str | os.PathLike, mode: str = "mmap") -> Folder:
    """Opens and validates a Hugging Face folder (UnsupportedError if it is none of the known kinds)."""
    return Folder(path, mode)


def load_folder(path: str | os.PathLike, mode: str = "mmap", copy: bool = False) -> dict[str, np.ndarray]:
    """Every tensor of a folder by name, in source order."""
    folder = Folder(path, mode)
    return {name: folder.get_tensor(name, copy) for name in folder.keys()}
