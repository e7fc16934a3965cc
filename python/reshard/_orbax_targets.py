"""Where each restored array goes: reshard shardings by dotted tree path (flat or nested), or a mesh
with (glob, PartitionSpec) rules and best-effort sharding (the C++ rules, as convert and import use
them), and the topology of the job."""

from __future__ import annotations

from collections.abc import Mapping
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


def layout(mesh: _core.Mesh, topology: _core.Topology, rules: Any, best_effort: str | None) -> _core.CheckpointLayout:
    """The layout ``reshard.convert`` and ``import_model`` give tensors (the C++ rules): the first
    matching glob rule that fits a tensor's rank, else best effort over `best_effort`, else replicated."""
    if rules is not None and not isinstance(rules, str):
        rules = list(rules)  # each (pattern, spec) pair is checked, by index, in the extension
    return _core.CheckpointLayout(mesh=mesh, topology=topology, rules=rules, best_effort_axis=best_effort)


def chunk_aligned(name: str, shape: tuple[int, ...], chunks: tuple[int, ...], mesh: _core.Mesh,
                  best_effort: _core.CheckpointLayout) -> _core.NamedSharding:
    """A 1-D `mesh`'s best-effort sharding, preferring the last dimension whose pieces are whole stored
    chunks (each device's box then reads only its own chunks, none read twice across the job);
    `best_effort` (a layout over the mesh's axis) where none is."""
    axis, size = mesh.axis_names[0], mesh.axis_sizes[0]
    for d in reversed(range(len(shape))):
        if shape[d] % size == 0 and d < len(chunks) and chunks[d] > 0 and (shape[d] // size) % chunks[d] == 0:
            return _core.NamedSharding(mesh, _core.PartitionSpec(*([None] * d + [axis])))
    return best_effort.sharding_for(name, shape)


def job(transport: _core.Transport | None) -> tuple[int, int]:
    return (0, 1) if transport is None else (transport.rank, transport.size)
