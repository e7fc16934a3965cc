"""Reading an Orbax item's arrays through TensorStore: each array opened once, and of each,
only the distinct boxes this process's devices hold, read straight into their shards."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorstore as ts

from . import _core
from . import _orbax_layout as _layout
from ._dtypes import dtype_name
from ._store_paths import StorePath, store_error
from .array import ShardedArray
from .errors import (FormatError, InvalidArgumentError, MissingTensorError, ReshardError, ReshardIOError,
                     UnsupportedDriverError, UnsupportedDtypeError, UnsupportedError)

# The bytes TensorStore's drivers read from files and objects (not OCDBT's, which reads through them).
_BYTES_READ = tuple(f"/tensorstore/kvstore/{driver}/bytes_read" for driver in ("file", "s3", "gcs"))


@dataclasses.dataclass(frozen=True)
class RestoreResult:
    """What one process's restore read: `bytes_read` from files or objects (as TensorStore counts them,
    data and metadata), `boxes` read and `bytes_needed` (the elements its devices hold, each distinct box
    once)."""

    tensors: int
    boxes: int
    bytes_needed: int
    bytes_read: int


def _file_bytes_read() -> int:
    total = 0
    for metric in ts.experimental_collect_matching_metrics("/tensorstore/kvstore/"):
        if metric["name"] in _BYTES_READ:
            total += int(sum(v.get("value", 0) for v in metric["values"]))
    return total


def context() -> ts.Context:
    """A fresh TensorStore context for one restore."""
    # No data cache (each box is read once, straight into its shard); OCDBT's b-tree nodes cached as Orbax does.
    return ts.Context({"cache_pool": {"total_bytes_limit": 0},
                       "cache_pool#ocdbt": {"total_bytes_limit": 100_000_000}})


_STORE_FAILURES = ("PERMISSION_DENIED", "UNAUTHENTICATED", "UNAVAILABLE", "DEADLINE_EXCEEDED")


def _error(name: str, e: Exception, in_store: bool = False) -> Exception:
    text = str(e)
    if in_store and (text.startswith(_STORE_FAILURES) or "NOT_FOUND" in text or "http_response_code" in text):
        # Typed as the store failed (ObjectNotFoundError, AccessDeniedError, ...), its response body left out.
        return store_error(f"tensor {name!r}", e)
    if "NOT_FOUND" in text:
        return ReshardIOError(f"tensor {name!r}: its array data is missing: {text}")
    return FormatError(f"tensor {name!r}: TensorStore cannot read it: {text}")


def _check_driver(item: _layout.Item, leaf: _layout.Leaf) -> None:
    """Without OCDBT each array is a folder: its metadata file says its format before TensorStore opens it."""
    stored = item.storage(leaf)
    if stored.ocdbt_root is not None:
        return
    folder = item.folder / stored.key
    expected = "zarr.json" if stored.driver == "zarr3" else ".zarray"
    if (folder / expected).is_file():
        return
    if not folder.is_dir():
        raise ReshardIOError(f"tensor {leaf.name!r}: no array folder {folder}")
    known = {".zarray": "zarr", "zarr.json": "zarr3", "attributes.json": "n5", ".zattrs": "zarr"}
    found = sorted(known.get(p.name, p.name) for p in folder.iterdir() if p.name in known or p.name.endswith(".json"))
    raise UnsupportedDriverError(f"tensor {leaf.name!r}: {folder} is not a {stored.driver} array (found {found}); "
                                 "reshard.orbax reads zarr and zarr3 arrays")


def open_arrays(item: _layout.Item, leaves: Sequence[_layout.Leaf], context: ts.Context) -> list[ts.TensorStore]:
    """Each leaf's array opened for reading (its metadata read, all at once), or the typed error naming it."""
    for leaf in leaves:
        if not leaf.is_array:
            raise UnsupportedError(f"tensor {leaf.name!r} is an Orbax {leaf.value_type}, not an array")
        _check_driver(item, leaf)
    futures = [ts.open(item.spec(leaf), context=context, open=True, read=True) for leaf in leaves]
    stores = []
    for leaf, future in zip(leaves, futures):
        try:
            stores.append(future.result())
        except ValueError as e:
            in_store = isinstance(item.folder, StorePath)  # a store's text may echo signing details: not chained
            raise _error(leaf.name, e, in_store) from (None if in_store else e)
    return stores


def dtype_of(name: str, store: ts.TensorStore) -> str:
    """reshard's dtype name for a stored array's element type."""
    try:
        return dtype_name(store.dtype.numpy_dtype)
    except (UnsupportedError, TypeError, ValueError) as e:
        raise UnsupportedDtypeError(f"tensor {name!r}: reshard has no dtype for TensorStore's {store.dtype.name}") \
            from e


def chunks_of(store: ts.TensorStore) -> tuple[int, ...]:
    """The stored array's read chunk shape (its shape where it has none)."""
    chunk = store.chunk_layout.read_chunk.shape
    return tuple(chunk) if chunk is not None else tuple(store.shape)


def _box_key(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape))


def start_box_read(store: ts.TensorStore, bounds: Sequence[tuple[int, int]], target: np.ndarray) -> Any:
    """Starts copying the box of `store` with (start, stop) `bounds` per dimension into `target`, an
    array of the box's shape (written in place); returns TensorStore's future of the copy."""
    source = store[tuple(slice(a, b) for a, b in bounds)]
    if bounds:
        source = source.translate_to[tuple(0 for _ in bounds)]
    return ts.array(target, copy=False, write=True).write(source)


def _start_reads(store: ts.TensorStore, array: ShardedArray) -> tuple[list[Any], list[tuple[Any, Any]], int]:
    """Copies of each distinct box of this process's shards from `store`, started; the shards that
    repeat a box (replicas on this process) copy from the first once it is read."""
    first: dict[Any, np.ndarray] = {}
    repeats: list[tuple[Any, Any]] = []
    futures = []
    needed = 0
    for shard in array.shards:
        key = _box_key(shard.index, array.shape)
        if key in first:
            repeats.append((first[key], shard.data))
            continue
        first[key] = shard.data
        needed += shard.data.nbytes
        if shard.data.size == 0:
            continue
        futures.append(start_box_read(store, key, shard.data))
    return futures, repeats, needed


def read(item: _layout.Item, names: Sequence[str], shardings: Any, topology: _core.Topology, process: int,
         expect: Mapping[str, Any] | None = None) -> tuple[dict[str, ShardedArray], RestoreResult]:
    """The arrays `names`, each laid out by its entry of `shardings` (or by ``shardings(name, shape, chunks)``,
    for layouts that depend on the stored shapes and chunking: each array is opened once either way)."""
    leaves = []
    for name in names:
        leaf = item.leaf(name)
        if leaf is None:
            raise MissingTensorError(f"{item.folder}: the Orbax tree has no path {name!r} (it has "
                                     f"{[x.name for x in item.leaves][:20]}{' ...' if len(item.leaves) > 20 else ''})")
        leaves.append(leaf)
    before = _file_bytes_read()
    stores = open_arrays(item, leaves, context())
    arrays, pending, repeats, boxes, needed = {}, [], [], 0, 0
    for i, (name, store) in enumerate(zip(names, stores)):
        dtype = dtype_of(name, store)
        shape = tuple(store.shape)
        sharding = shardings(name, shape, chunks_of(store)) if callable(shardings) else shardings[i]
        if expect is not None and name in expect:
            _check_expected(name, shape, dtype, expect[name])
        try:
            array = ShardedArray(_core._ShardedArray.allocate(shape, dtype, sharding, topology, process))
        except ReshardError as e:  # a layout that does not fit the stored shape: name the tensor
            raise type(e)(f"tensor {name!r} {list(shape)}: {e}") from e
        futures, again, n = _start_reads(store, array)
        pending += [(name, f) for f in futures]
        repeats += again
        boxes += len(futures)
        needed += n
        arrays[name] = array
    failed = None
    for name, future in pending:  # every read finishes before any error leaves: none writes into a dropped shard
        try:
            future.result()
        except ValueError as e:
            failed = failed or (name, e)
    if failed:
        in_store = isinstance(item.folder, StorePath)
        raise _error(*failed, in_store) from (None if in_store else failed[1])
    for source, target in repeats:
        target[...] = source
    return arrays, RestoreResult(len(names), boxes, needed, _file_bytes_read() - before)


def _check_expected(name: str, shape: tuple[int, ...], dtype: str, want: Any) -> None:
    want_shape = getattr(want, "shape", None)
    if want_shape is not None and tuple(want_shape) != shape:
        raise InvalidArgumentError(f"shardings: {name!r} asks for shape {tuple(want_shape)}, the checkpoint has "
                                   f"{shape}")
    want_dtype = getattr(want, "dtype", None)
    if want_dtype is not None and dtype_name(want_dtype) != dtype:
        raise InvalidArgumentError(f"shardings: {name!r} asks for dtype {np.dtype(want_dtype)}, the checkpoint has "
                                   f"{dtype}")
