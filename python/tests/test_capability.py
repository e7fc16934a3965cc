"""capability.py: a missing capability skips a test, or fails it where
RESHARD_REQUIRE_ALL_CAPABILITIES=1; a plain skip stays a skip. The probes run in a pytest of
their own, as a subprocess, with and without the setting."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent

PROBES = '''
import pytest
from capability import import_or_skip, needs, skip_without

@needs(True, "a capability no machine has", "mark's reason")
def test_marked():
    raise AssertionError("never reached")

@needs(False, "a capability every machine has", "never said")
def test_marked_present():
    pass

def test_called():
    skip_without("another capability", "call's reason")

def test_import():
    import_or_skip("a_module_that_is_nowhere")

def test_plain_skip():
    pytest.skip("not a capability")
'''

# The hooks of conftest.py that the probes need, without its JAX settings.
CONFTEST = '''
import capability

def pytest_configure(config):
    config.addinivalue_line("markers", "capability(capability, missing, reason): made by capability.needs")

def pytest_runtest_setup(item):
    capability.check_marks(item)
'''


def run_probes(tmp_path: pathlib.Path, setting: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_probes.py").write_text(PROBES)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    env = {k: v for k, v in os.environ.items() if k != "RESHARD_REQUIRE_ALL_CAPABILITIES"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    if setting is not None:
        env["RESHARD_REQUIRE_ALL_CAPABILITIES"] = setting
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--rootdir",
                           str(tmp_path), str(tmp_path)], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)


@pytest.mark.parametrize("setting", [None, "0", ""])
def test_a_missing_capability_skips_on_an_ordinary_machine(tmp_path, setting):
    done = run_probes(tmp_path, setting)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 4 skipped" in done.stdout, done.stdout
    for reason in ("no a capability no machine has: mark's reason", "no another capability: call's reason",
                   "no the Python module a_module_that_is_nowhere", "not a capability"):
        assert reason in done.stdout, done.stdout


def test_a_missing_capability_fails_where_every_capability_is_required(tmp_path):
    done = run_probes(tmp_path, "1")
    assert done.returncode == 1, done.stdout + done.stderr
    # A mark fails the test in its setup (an error), a call in its body.
    assert "2 failed, 1 passed, 1 skipped, 1 error" in done.stdout, done.stdout
    said = "RESHARD_REQUIRE_ALL_CAPABILITIES=1 says this machine has"
    for outcome, name, reason in (("ERROR", "test_marked", "a capability no machine has, but it has not: mark's reason"),
                                  ("FAILED", "test_called", "another capability, but it has not: call's reason"),
                                  ("FAILED", "test_import",
                                   "the Python module a_module_that_is_nowhere, but it has not")):
        assert f"{said} {reason}" in done.stdout, done.stdout
        assert f"{outcome} test_probes.py::{name}" in done.stdout, done.stdout
    assert "SKIPPED [1] test_probes.py" in done.stdout and "not a capability" in done.stdout, done.stdout
    assert "never reached" not in done.stdout
