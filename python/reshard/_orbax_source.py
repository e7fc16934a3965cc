"""An Orbax or Levanter checkpoint as an export's tensor source: each array opened once through
TensorStore (its own drivers for files, s3:// and gs://), and each box the export asks for read
straight into the buffer it hands over, so that a process holds only the blocks in flight."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import _orbax_layout as _layout
from . import _orbax_read as _read
from ._store_paths import StorePath
from .pipelines import _TensorSource


def open_source(item: _layout.Item) -> _TensorSource:
    """Every array of `item` (its metadata read, nothing else) as a tensor source."""
    leaves = [leaf for leaf in item.leaves if leaf.is_array]
    stores = _read.open_arrays(item, leaves, _read.context())
    names = [leaf.name for leaf in leaves]
    specs = [(name, _read.dtype_of(name, store), tuple(store.shape)) for name, store in zip(names, stores)]
    in_store = isinstance(item.folder, StorePath)

    def read(source: int, starts: Sequence[int], stops: Sequence[int], buffer: memoryview) -> None:
        store = stores[source]
        bounds = tuple(zip(starts, stops))
        target = np.frombuffer(buffer, dtype=store.dtype.numpy_dtype).reshape(tuple(b - a for a, b in bounds))
        if target.size == 0:
            return
        try:
            _read.start_box_read(store, bounds, target).result()
        except ValueError as e:  # a store's text may echo signing details: not chained
            raise _read._error(names[source], e, in_store) from (None if in_store else e)

    return _TensorSource(specs, read)
