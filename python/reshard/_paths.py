"""Paths given to reshard's functions: a str or os.PathLike, checked by argument name.

A path reaches the C++ library as its text, which the library parses
(storage::Location::parse): a local path, or an ``s3://BUCKET/KEY`` or
``gs://BUCKET/KEY`` URL. Never through ``pathlib``, which folds "s3://b/k"
into "s3:/b/k" (refused by the library, which names the argument and asks
whether "s3://b/k" was meant). Another scheme (``hf://``, ``http://``) is an
InvalidArgumentError naming the argument.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import ArgumentTypeError


def fspath(value: Any, argument: str) -> str:
    """`value` as os.fspath gives it (a URL's text unchanged); anything that is not a path is an
    ArgumentTypeError naming `argument`."""
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise ArgumentTypeError(f"{argument}: a path (str or os.PathLike), not a {type(value).__name__}")
