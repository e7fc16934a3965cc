#!/usr/bin/env bash
# Checks the folders and adapters reshard writes against the libraries that load
# them: torch, transformers and PEFT from PyPI, in a virtual environment of this
# script's own (several GB: torch's CUDA build). Not part of scripts/test.sh or
# CI; run it by hand after a release build:
#
#   bash scripts/build.sh release && bash scripts/check-hf-clients.sh
#
# It builds small random Llama- and GPT-2-style models and LoRA adapters with
# those libraries (tied and untied embeddings, f32 and bf16, plain LoRA, rsLoRA
# with rank and alpha patterns, fan_in_fan_out, DoRA, embeddings, lora_bias,
# modules_to_save), runs reshard's commands on them and compares with the
# libraries' own results, then prints one table row per case. Exit 0 only when
# every case passes.
#
# Environment: HF_CHECK_VENV (default build/hf-check/venv) is the virtual
# environment, made and filled when missing; RESHARD (default
# build/release/reshard) the command line under test; HF_CHECK_WORK (default a
# fresh temporary folder) where the models are written.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${HF_CHECK_VENV:-build/hf-check/venv}
reshard=${RESHARD:-build/release/reshard}
if [[ ! -x $reshard ]]; then
  echo "check-hf-clients: $reshard not found: run scripts/build.sh release first (or set RESHARD)" >&2
  exit 2
fi
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch, transformers, peft, safetensors" 2>/dev/null; then
  echo "check-hf-clients: installing torch, transformers and peft into $venv (several GB, this takes a while)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check torch transformers peft safetensors numpy
fi
"$venv/bin/python" -c "import torch, transformers, peft; print(f'torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}')"
work=${HF_CHECK_WORK:-$(mktemp -d)}
exec "$venv/bin/python" scripts/check_hf_clients.py --reshard "$(realpath "$reshard")" --work "$work"
