"""reshard.jax.export and load_pretrained on 8 forced CPU devices (in a fresh interpreter,
as XLA reads its device count once): a Levanter-Llama-shaped pytree on permuted device
orders out to Hugging Face files (checked by the safetensors package against numpy) and
back onto other shardings, bit for bit."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from conftest import SEED


def test_export_and_load_pretrained_a_sharded_llama(tmp_path):
    script = pathlib.Path(__file__).with_name("jax_export_load.py")
    done = subprocess.run([sys.executable, str(script), str(SEED), str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"RESHARD_SEED={SEED}\n{done.stdout}\n{done.stderr}"
    assert "0 mismatches" in done.stdout
