"""A merged export whose base model is a Hugging Face folder: a LoRA run's checkpoint holds only the
factors it trained, so the base weights are imported from `base` (the tensor map run backwards, each
process reading only its share, laid out as the checkpoint's arrays are) and the export merges the
factors into them with merge-lora's arithmetic, as it merges a checkpoint's own base weights."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _core
from . import pipelines as _pipelines
from ._store_paths import path_of
from .array import ShardedArray
from .errors import InvalidArgumentError, ObjectNotFoundError, ReshardError, ReshardIOError


def config_of(base: Any) -> str | None:
    """The base folder's config.json text, or None where it has none."""
    try:
        return (path_of(base, "base") / "config.json").read_bytes().decode("utf-8")
    except (FileNotFoundError, ObjectNotFoundError):
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise ReshardIOError(f"base: {base}/config.json cannot be read: {e}") from e


def with_base(arrays: Mapping[str, ShardedArray], base: Any, tensor_map: str, mesh: _core.Mesh,
              topology: _core.Topology, rules: Any, best_effort: str | None,
              transport: _core.Transport | None) -> dict[str, ShardedArray]:
    """`arrays` (LoRA factors) with the base model's weights from the folder `base` beside them."""
    try:
        weights = _pipelines.import_model(base, tensor_map, mesh, topology, rules=rules, best_effort=best_effort,
                                          transport=transport)
    except ReshardError as e:
        text = str(e)
        raise type(e)(f"base: {text[len('hf_dir: '):] if text.startswith('hf_dir: ') else text}") from e
    both = sorted(set(weights) & set(arrays))
    if both:
        raise InvalidArgumentError(f"base: the checkpoint holds base weights itself ({both[:3]}...): merge into "
                                   "them by leaving base out")
    return {**weights, **arrays}
