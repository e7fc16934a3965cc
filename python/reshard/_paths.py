"""Paths given to reshard's functions: a str or os.PathLike, checked by argument name."""

from __future__ import annotations

import os
from typing import Any

from .errors import ArgumentTypeError


def fspath(value: Any, argument: str) -> str:
    """`value` as os.fspath gives it; anything that is not a path is an ArgumentTypeError naming `argument`."""
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise ArgumentTypeError(f"{argument}: a path (str or os.PathLike), not a {type(value).__name__}")
