"""Skips for a capability the machine lacks (MPI and mpirun, the reshard binary, the object-store
servers, an optional package), which fail instead where ``RESHARD_REQUIRE_ALL_CAPABILITIES=1``:
scripts/test.sh sets it in CI and as root, where the machine has them all and a skip would pass
what never ran.

A skip that is no missing capability stays a plain ``pytest.skip``; the test command lists every
skip with its reason either way.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE = "RESHARD_REQUIRE_ALL_CAPABILITIES"


def all_required() -> bool:
    """True where RESHARD_REQUIRE_ALL_CAPABILITIES=1."""
    return os.environ.get(REQUIRE) == "1"


def skip_without(capability: str, reason: str) -> NoReturn:
    """Skips the running test for want of `capability` (a phrase: "mpirun"), saying `reason`;
    fails it instead where every capability is required."""
    if all_required():
        pytest.fail(f"{REQUIRE}=1 says this machine has {capability}, but it has not: {reason}", pytrace=False)
    pytest.skip(f"no {capability}: {reason}")


def needs(missing: bool, capability: str, reason: str) -> pytest.MarkDecorator:
    """A mark for a test that needs `capability`, which this machine lacks where `missing`:
    conftest.py skips it then (or fails it, see skip_without)."""
    return pytest.mark.capability(capability=capability, missing=missing, reason=reason)


def import_or_skip(module: str, capability: str | None = None) -> ModuleType:
    """`module`, imported; where it cannot be, skip_without(`capability`, default "the module ...")."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        skip_without(capability or f"the Python module {module}", f"cannot import it: {error}")


def check_marks(item: pytest.Item) -> None:
    """For conftest.py's pytest_runtest_setup: the `needs` marks of `item`."""
    for mark in item.iter_markers("capability"):
        if mark.kwargs["missing"]:
            skip_without(mark.kwargs["capability"], mark.kwargs["reason"])
