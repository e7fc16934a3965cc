"""Shared test setup: 64 forced CPU devices for JAX, a seeded RNG, and the capability marks
(capability.py).

XLA reads XLA_FLAGS when its CPU backend starts, so it is set here, before any
test module imports jax.
"""

from __future__ import annotations

import os
import random
import zlib

import pytest

import capability

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=64"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# 64-bit arrays stay 64-bit, so JAX's bytes compare with reshard's.
os.environ.setdefault("JAX_ENABLE_X64", "1")


def _seed() -> int:
    value = os.environ.get("RESHARD_SEED")
    return int(value) if value else random.SystemRandom().randrange(2**32)


SEED = _seed()


def pytest_report_header(config):
    return f"RESHARD_SEED={SEED} (set RESHARD_SEED to replay)"


@pytest.fixture
def rng(request) -> random.Random:
    """A random.Random seeded from RESHARD_SEED (or a fresh seed), printed on failure."""
    # crc32, not hash(): str hashes change from run to run.
    seed = SEED ^ zlib.crc32(request.node.name.encode())
    print(f"RESHARD_SEED={SEED} (test seed {seed})")
    return random.Random(seed)


def pytest_configure(config):
    config.addinivalue_line("markers", "capability(capability, missing, reason): made by capability.needs")


def pytest_runtest_setup(item):
    capability.check_marks(item)
