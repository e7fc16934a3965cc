"""Where each restored array goes: reshard shardings by dotted tree path (flat or nested), or a mesh
with (glob, PartitionSpec) rules or best-effort sharding, and the topology of the job."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

from . import _core
from .errors import InvalidArgumentError


def is_sharding(x: Any) -> bool:
    return isinstance(x, _core.NamedSharding)


def flatten(tree: Any, prefix: str, out: dict[str, Any]) -> Any:
    """{dotted name: sharding} of a nesting of dicts / lists / tuples, and its shape to rebuild it."""
    if is_sharding(tree):
        if (prefix or "_") in out:
            raise InvalidArgumentError(f"shardings: {prefix!r} is named twice (once by dotted keys, once nested)")
        out[prefix or "_"] = tree
        return None
    if isinstance(tree, Mapping):
        return (dict, [(k, flatten(v, f"{prefix}.{k}" if prefix else str(k), out)) for k, v in tree.items()])
    if isinstance(tree, (list, tuple)):
        return (type(tree), [(i, flatten(v, f"{prefix}.{i}" if prefix else str(i), out)) for i, v in enumerate(tree)])
    raise InvalidArgumentError(f"shardings: {prefix or 'the tree'} is a {type(tree).__name__}, not a "
                               "reshard.NamedSharding (nor a dict, list or tuple of them)")


def rebuild(shape: Any, prefix: str, values: Mapping[str, Any]) -> Any:
    if shape is None:
        return values[prefix or "_"]
    kind, children = shape
    built = [(k, rebuild(c, f"{prefix}.{k}" if prefix else str(k), values)) for k, c in children]
    return dict(built) if kind is dict else kind(v for _, v in built)


def has_shardings(tree: Any) -> bool:
    if is_sharding(tree):
        return True
    if isinstance(tree, Mapping):
        return any(has_shardings(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return any(has_shardings(v) for v in tree)
    return False


def _best_effort(shape: tuple[int, ...], mesh: _core.Mesh, axis: str) -> _core.NamedSharding:
    """reshard's best-effort sharding (as ``--best-effort``): the last dimension the axis divides, else replicated."""
    if axis not in mesh.axis_names:
        raise InvalidArgumentError(f"best_effort: the mesh has no axis {axis!r} (it has {list(mesh.axis_names)})")
    size = mesh.axis_sizes[list(mesh.axis_names).index(axis)]
    for d in reversed(range(len(shape))):
        if shape[d] % size == 0:
            return _core.NamedSharding(mesh, _core.PartitionSpec(*([None] * d + [axis])))
    return _core.NamedSharding(mesh, _core.PartitionSpec())


def chunk_aligned(shape: tuple[int, ...], chunks: tuple[int, ...], mesh: _core.Mesh) -> _core.NamedSharding:
    """A 1-D `mesh`'s best-effort sharding, preferring the last dimension whose pieces are whole stored
    chunks (each device's box then reads only its own chunks, none read twice across the job)."""
    axis, size = mesh.axis_names[0], mesh.axis_sizes[0]
    for d in reversed(range(len(shape))):
        if shape[d] % size == 0 and d < len(chunks) and chunks[d] > 0 and (shape[d] // size) % chunks[d] == 0:
            return _core.NamedSharding(mesh, _core.PartitionSpec(*([None] * d + [axis])))
    return _best_effort(shape, mesh, axis)


def by_rules(name: str, shape: tuple[int, ...], mesh: _core.Mesh, rules: Sequence[tuple[str, Any]] | None,
              best_effort: str | None) -> _core.NamedSharding:
    for pattern, spec in rules or ():
        if fnmatch.fnmatchcase(name, pattern):
            if not isinstance(spec, _core.PartitionSpec):
                spec = _core.PartitionSpec(*spec)
            return _core.NamedSharding(mesh, spec)
    if best_effort is not None:
        return _best_effort(shape, mesh, best_effort)
    return _core.NamedSharding(mesh, _core.PartitionSpec())


def job(transport: _core.Transport | None) -> tuple[int, int]:
    return (0, 1) if transport is None else (transport.rank, transport.size)
