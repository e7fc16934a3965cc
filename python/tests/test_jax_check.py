"""reshard.jax.check against jit itself, on 8 forced CPU devices (in a fresh interpreter,
as XLA reads its device count once): for each kind of use (out_shardings on a mesh, plain
arguments, in_shardings) it flags exactly the arrays jit refuses."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from conftest import SEED


def test_check_flags_exactly_what_jit_refuses():
    script = pathlib.Path(__file__).with_name("jax_check_vs_jit.py")
    done = subprocess.run([sys.executable, str(script), str(SEED)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"RESHARD_SEED={SEED}\n{done.stdout}\n{done.stderr}"
    assert "another device order" in done.stdout and "0 mismatches" in done.stdout
    # Each kind of use was met with arrays jit refuses.
    for use in ("(out_shardings) refuses", "(arguments) refuses", "(in_shardings) refuses another tiling"):
        assert use in done.stdout, use
