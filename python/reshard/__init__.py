"""reshard: move sharded tensors between device layouts, processes, hosts and files.

The layout model is JAX's: ``Mesh``, ``PartitionSpec`` (``P``) and
``NamedSharding`` give the same ``devices_indices_map``, shard shapes and
replica ids as ``jax.sharding`` for the same layout, with devices as integer
ids and a ``Topology`` saying which process owns each.
"""

from __future__ import annotations

from . import _core
from . import errors
from . import checkpoint, hf, pipelines, safetensors, storage
from ._core import (Box, InProcessGroup, Mesh, NamedSharding, PartitionSpec, Plan, PlanOptions, PlanStats, Topology,
                    Transfer, Transport)
from ._dtypes import DTYPE_NAMES, dtype_name, numpy_dtype
from .errors import ReshardError
from ._plan import plan
from .array import Shard, ShardedArray, from_host, reshard, reshard_into, to_host
from .checkpoint import restore as restore_checkpoint
from .checkpoint import restore_into as restore_checkpoint_into
from .checkpoint import save as save_checkpoint
from .checkpoint import save_async as save_checkpoint_async
from .pipelines import convert, export, import_checkpoint, import_model, merge_lora
from ._inspection import inspect, verify
from ._job_transport import transport
from .memory import cached_memory, release_cached_memory, set_cached_memory_limit

P = PartitionSpec

__version__ = "0.1.0"

__all__ = [
    "cached_memory",
    "release_cached_memory",
    "set_cached_memory_limit",
    "checkpoint",
    "convert",
    "export",
    "import_checkpoint",
    "import_model",
    "inspect",
    "merge_lora",
    "pipelines",
    "restore_checkpoint",
    "restore_checkpoint_into",
    "save_checkpoint",
    "save_checkpoint_async",
    "Box",
    "Shard",
    "ShardedArray",
    "from_host",
    "InProcessGroup",
    "reshard",
    "reshard_into",
    "to_host",
    "verify",
    "DTYPE_NAMES",
    "Mesh",
    "NamedSharding",
    "P",
    "PartitionSpec",
    "Plan",
    "PlanOptions",
    "PlanStats",
    "ReshardError",
    "Topology",
    "Transfer",
    "Transport",
    "transport",
    "dtype_name",
    "errors",
    "hf",
    "numpy_dtype",
    "plan",
    "safetensors",
    "storage",
]
