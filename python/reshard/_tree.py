"""Pytree-ish nesting of arrays for the batched operations: dicts, lists and
tuples (named tuples too) of leaves, flattened in order and rebuilt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Leaf = Callable[[Any], bool]


def flatten(tree: Any, is_leaf: Leaf, what: str) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """The leaves of `tree` in order (dicts by insertion order), and the function
    that rebuilds the same nesting from a list of as many new leaves."""
    leaves: list[Any] = []
    shape = _walk(tree, is_leaf, what, leaves, "tree")
    return leaves, lambda new: _build(shape, iter(new))


def broadcast(prefix: Any, tree: Any, is_tree_leaf: Leaf, is_prefix_leaf: Leaf, what: str) -> list[Any]:
    """`prefix`'s leaves, one per leaf of `tree`: a leaf of `prefix` stands for the
    whole subtree of `tree` in its place (as JAX's tree prefixes do)."""
    out: list[Any] = []
    _broadcast(prefix, tree, is_tree_leaf, is_prefix_leaf, what, out, "tree")
    return out


def _walk(tree: Any, is_leaf: Leaf, what: str, leaves: list[Any], path: str) -> Any:
    if is_leaf(tree):
        leaves.append(tree)
        return None
    if isinstance(tree, dict):
        return (type(tree), list(tree), [_walk(v, is_leaf, what, leaves, f"{path}[{k!r}]") for k, v in tree.items()])
    if isinstance(tree, (list, tuple)):
        return (type(tree), None, [_walk(v, is_leaf, what, leaves, f"{path}[{i}]") for i, v in enumerate(tree)])
    raise TypeError(f"{path} is a {type(tree).__name__}, not a {what} (nor a dict, list or tuple of them)")


def _build(shape: Any, leaves: Any) -> Any:
    if shape is None:
        return next(leaves)
    kind, keys, children = shape
    values = [_build(child, leaves) for child in children]
    if keys is not None:
        return kind(zip(keys, values))
    if kind is list or kind is tuple:
        return kind(values)
    return kind(*values)  # a named tuple


def _broadcast(prefix: Any, tree: Any, is_tree_leaf: Leaf, is_prefix_leaf: Leaf, what: str, out: list[Any],
               path: str) -> None:
    if is_prefix_leaf(prefix):
        count: list[Any] = []
        _walk(tree, is_tree_leaf, "leaf", count, path)
        out.extend([prefix] * len(count))
        return
    from .errors import InvalidArgumentError

    if is_tree_leaf(tree):
        raise InvalidArgumentError(f"{path} is one array, but its {what} is a {type(prefix).__name__}")
    if isinstance(tree, dict):
        if not isinstance(prefix, dict) or list(prefix) != list(tree):
            keys = list(prefix) if isinstance(prefix, dict) else type(prefix).__name__
            raise InvalidArgumentError(f"{path} has keys {list(tree)}, its {what} has {keys}")
        for k, v in tree.items():
            _broadcast(prefix[k], v, is_tree_leaf, is_prefix_leaf, what, out, f"{path}[{k!r}]")
        return
    if isinstance(tree, (list, tuple)):
        if not isinstance(prefix, (list, tuple)) or len(prefix) != len(tree):
            got = len(prefix) if isinstance(prefix, (list, tuple)) else type(prefix).__name__
            raise InvalidArgumentError(f"{path} has {len(tree)} items, its {what} has {got}")
        for i, (p, v) in enumerate(zip(prefix, tree)):
            _broadcast(p, v, is_tree_leaf, is_prefix_leaf, what, out, f"{path}[{i}]")
        return
    raise TypeError(f"{path} is a {type(tree).__name__}, not an array (nor a dict, list or tuple of them)")
