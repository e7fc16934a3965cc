"""safetensors files: read as zero-copy numpy views of a memory map, or plain reads; write.

The API mirrors the ``safetensors`` package's numpy one: ``safe_open``,
``load_file`` and ``save_file``. Every header rule of the safetensors reference is
checked when a file is opened; a broken file raises the matching
``reshard.errors.InvalidFileError`` subclass naming the file and tensor.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from . import _core
from ._dtypes import dtype_name, numpy_dtype
from ._paths import fspath as _fspath

TensorInfo = _core.TensorInfo

__all__ = ["SafeOpen", "TensorInfo", "load_file", "safe_open", "save_file"]


class SafeOpen:
    """An open, validated safetensors file: ``keys()``, ``get_tensor``, ``get_slice``, ``metadata()``.

    In ``mmap`` mode ``get_tensor`` returns a read-only numpy view of the
    mapping (no copy; the mapping lives while any view does). In ``pread``
    mode, or with ``copy=True``, it returns a fresh array read from the file.
    `path` may be an object, ``s3://BUCKET/KEY`` or ``gs://BUCKET/KEY``: it is
    read by byte ranges (``mode`` is then ``pread``, whatever was asked).
    """

    def __init__(self, path: str | os.PathLike, mode: str = "mmap") -> None:
        self._file = _core.SafetensorsFile.open(_fspath(path, "path"), mode)

    @classmethod
    def _from_core(cls, file: _core.SafetensorsFile) -> SafeOpen:
        self = cls.__new__(cls)
        self._file = file
        return self

    def __enter__(self) -> SafeOpen:
        return self

    def __exit__(self, *exc: object) -> None:
        # Views handed out keep the mapping alive by themselves.
        return None

    @property
    def path(self) -> str:
        """The file's path, or its URL."""
        return str(self._file.path)

    @property
    def data_start(self) -> int:
        """File offset of the data buffer (tensor offsets count from here)."""
        return self._file.data_start

    @property
    def mode(self) -> str:
        """'mmap' or 'pread'."""
        return self._file.mode

    def keys(self) -> list[str]:
        """Tensor names in the order of their bytes in the file."""
        return [t.name for t in self._file.tensors]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._file.tensors)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._file

    def metadata(self) -> dict[str, str] | None:
        """``__metadata__``, or None when the file has none."""
        return self._file.metadata

    def info(self, name: str) -> TensorInfo:
        """Dtype, shape and offsets of tensor `name` (MissingTensorError if absent)."""
        return self._file.info(name)

    @property
    def tensors(self) -> list[TensorInfo]:
        """Every tensor entry, in data order."""
        return self._file.tensors

    def get_bytes(self, name: str, copy: bool = False) -> np.ndarray:
        """A tensor's raw bytes as a 1-D uint8 array (a view in mmap mode unless `copy`); any dtype."""
        if self._file.mode == "mmap" and not copy:
            view = self._file._view(name)
            view.flags.writeable = False
            return view
        out = np.empty(self._file.info(name).nbytes, np.uint8)
        self._file._read_into(name, out)
        return out

    def get_tensor(self, name: str, copy: bool = False) -> np.ndarray:
        """Tensor `name` as a numpy array of its dtype and shape (see the class for view vs copy)."""
        info = self._file.info(name)
        return self.get_bytes(name, copy).view(numpy_dtype(info.dtype)).reshape(info.shape)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.get_tensor(name)

    def get_slice(self, name: str, index: Any) -> np.ndarray:
        """``tensor[index]`` for basic slices (step 1), reading only the bytes the slice covers."""
        info = self._file.info(name)
        box = _index_to_box(index, info.shape)
        dtype = numpy_dtype(info.dtype)
        out = np.empty(box.volume * dtype.itemsize, np.uint8)
        self._file._read_box_into(name, box, out)
        return out.view(dtype).reshape(box.shape)


def _index_to_box(index: Any, shape: tuple[int, ...]) -> _core.Box:
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) > len(shape):
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(f"index {index!r} has more entries than the tensor's rank {len(shape)}")
    origin, extent = [], []
    for d, size in enumerate(shape):
        part = index[d] if d < len(index) else slice(None)
        if not isinstance(part, slice):
            part = slice(part, part + 1 if part != -1 else None)
        start, stop, step = part.indices(size)
        if step != 1:
            from .errors import UnsupportedError

            raise UnsupportedError(f"get_slice takes slices with step 1, got {part!r}")
        origin.append(start)
        extent.append(max(0, stop - start))
    return _core.Box(origin, extent)


def safe_open(path: str | os.PathLike, framework: str = "np", mode: str = "mmap") -> SafeOpen:
    """Opens and validates a safetensors file (``framework`` is accepted for compatibility; numpy only)."""
    if framework not in ("np", "numpy"):
        from .errors import UnsupportedError

        raise UnsupportedError(f"reshard.safetensors returns numpy arrays, not framework {framework!r}")
    return SafeOpen(path, mode)


def load_file(path: str | os.PathLike, mode: str = "mmap", copy: bool = False) -> dict[str, np.ndarray]:
    """Every tensor of a file by name: read-only views of a map (``mmap``), or fresh arrays (``pread`` / ``copy``)."""
    f = SafeOpen(path, mode)
    return {name: f.get_tensor(name, copy) for name in f.keys()}


def save_file(
    tensors: Mapping[str, np.ndarray], filename: str | os.PathLike, metadata: Mapping[str, str] | None = None
) -> None:
    """Writes numpy arrays as a safetensors file, as ``safetensors.numpy.save_file`` does.

    Tensors are ordered as the reference orders them (dtype, then name), the
    header is padded to 8 bytes, and the file appears at `filename` only once
    complete. `metadata` (str to str) becomes ``__metadata__``; none if None.
    """
    entries = []
    for name, array in tensors.items():
        array = np.asarray(array)
        # ascontiguousarray alone would turn a scalar into shape (1,).
        flat = np.ascontiguousarray(array.reshape(-1))
        entries.append((name, dtype_name(array.dtype), array.shape, flat.view(np.uint8)))
    _core._write_safetensors(_fspath(filename, "filename"), entries, None if metadata is None else list(metadata.items()))
