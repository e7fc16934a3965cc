"""reshard checkpoints: save sharded arrays from every process at once, restore them onto any layout.

A checkpoint is a folder of safetensors data files (one per writing process)
and a ``manifest.json`` of every tensor's chunks with their checksums (see
docs/checkpoint-format.md). Each process writes only the chunks it holds (a
replicated chunk once), and the folder appears under its name only when whole.
A restore reads only the chunks this process's devices need, checks their
checksums first (a damaged chunk is a ``ChecksumMismatchError`` naming it),
and may take any subset of the tensors onto any layout and number of processes.

Every function is collective over `transport` (each process calls it with its
own part); None runs in this process alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _core
from .array import ShardedArray, _default_topology
from .errors import ArgumentTypeError
from ._paths import fspath as _fspath

SaveHandle = _core.SaveHandle
SaveResult = _core.SaveResult
RestoreResult = _core.RestoreResult

__all__ = ["RestoreResult", "SaveHandle", "SaveResult", "restore", "restore_into", "save", "save_async"]


def _named(arrays: Mapping[str, ShardedArray]) -> tuple[list[str], list[_core._ShardedArray]]:
    if not isinstance(arrays, Mapping):
        raise ArgumentTypeError(
            f"arrays: a mapping of names to ShardedArrays, not a {type(arrays).__name__}")
    for name, array in arrays.items():
        if not isinstance(array, ShardedArray):
            raise ArgumentTypeError(f"arrays[{name!r}] is a {type(array).__name__}, not a ShardedArray")
    return list(arrays), [a._array for a in arrays.values()]


class Restored(dict):
    """What :func:`restore` returns: {name: ShardedArray}, and ``stats``, this process's RestoreResult."""

    def __init__(self, arrays: Any = (), stats: RestoreResult | None = None) -> None:
        # Callable as dict is (tree utilities rebuild a mapping as type(mapping)(items)).
        super().__init__(arrays)
        self.stats = stats


def _metadata(metadata: Mapping[str, str] | None) -> list[tuple[str, str]] | None:
    # Refused rather than str()-ed: a restore would hand back "5" for 5, silently another type.
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise ArgumentTypeError(f"metadata: a mapping of str to str, not a {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise ArgumentTypeError(f"metadata: key {key!r} is a {type(key).__name__}, not a str")
        if not isinstance(value, str):
            raise ArgumentTypeError(f"metadata[{key!r}] is a {type(value).__name__}: metadata maps str to str "
                                    "(encode other values yourself, e.g. json.dumps)")
    return list(metadata.items())


def save(
    arrays: Mapping[str, ShardedArray],
    path: str | os.PathLike,
    *,
    metadata: Mapping[str, str] | None = None,
    replace: bool = False,
    transport: _core.Transport | None = None,
) -> SaveResult:
    """Saves `arrays` (name to ShardedArray) as the checkpoint folder `path`; what this process wrote.

    `metadata` (str to str; another type is an ArgumentTypeError naming its
    key, not converted) is kept in the manifest. An existing checkpoint is an
    AlreadyExistsError unless ``replace=True`` (then it is replaced at the
    final rename), as every writer's output is; a save that fails leaves what
    was there.
    """
    names, cores = _named(arrays)
    options = _core.SaveOptions(metadata=_metadata(metadata), replace=replace)
    return _core._save_checkpoint(_fspath(path, "path"), names, cores, options=options, transport=transport)


def save_async(
    arrays: Mapping[str, ShardedArray],
    path: str | os.PathLike,
    *,
    metadata: Mapping[str, str] | None = None,
    replace: bool = False,
    staging_bytes: int = _core.DEFAULT_STAGING_BYTES,
    transport: _core.Transport | None = None,
) -> SaveHandle:
    """Like save, returning once this process's chunks are staged in host memory.

    The arrays may change as soon as it returns; the writing and the commit go
    on in the background. ``handle.wait()`` (which releases the GIL) returns
    the SaveResult or raises the save's error; ``handle.ready()`` polls. A larger
    save stages in waves of at most `staging_bytes`. `transport` must not be
    used by anything else until wait() returns.
    """
    names, cores = _named(arrays)
    options = _core.SaveOptions(metadata=_metadata(metadata), replace=replace, staging_bytes=staging_bytes)
    return _core._save_checkpoint_async(_fspath(path, "path"), names, cores, options=options, transport=transport)


def restore(
    path: str | os.PathLike,
    targets: Mapping[str, _core.NamedSharding],
    topology: _core.Topology | None = None,
    *,
    verify_checksums: bool = True,
    transport: _core.Transport | None = None,
) -> Restored:
    """The tensors named by `targets` (any subset, name to NamedSharding), each laid out by its sharding.

    Returns a :class:`Restored`: {name: ShardedArray} in the order of `targets`,
    with this process's RestoreResult as ``.stats``. A name the checkpoint lacks is a
    MissingTensorError; a damaged chunk a ChecksumMismatchError (unless
    ``verify_checksums=False``, which reads only the bytes the slices need).
    """
    names = list(targets)
    shardings = [targets[n] for n in names]
    topology = topology or _default_topology(shardings, transport)
    options = _core.RestoreOptions(verify_checksums=verify_checksums)
    cores, stats = _core._restore_checkpoint(_fspath(path, "path"), names, shardings, topology, options=options,
                                             transport=transport)
    return Restored({n: ShardedArray(a) for n, a in zip(names, cores)}, stats)


def restore_into(
    path: str | os.PathLike,
    arrays: Mapping[str, ShardedArray],
    *,
    verify_checksums: bool = True,
    transport: _core.Transport | None = None,
) -> RestoreResult:
    """Fills `arrays` (name to ShardedArray, allocated by the caller in any layout) from the checkpoint.

    Shapes and dtypes must match the saved ones; a read-only array (adopted from
    a read-only numpy array) is an InvalidArgumentError before anything is read.
    """
    names, cores = _named(arrays)
    options = _core.RestoreOptions(verify_checksums=verify_checksums)
    return _core._restore_checkpoint_into(_fspath(path, "path"), names, cores, options=options, transport=transport)


