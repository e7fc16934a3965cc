#!/usr/bin/env bash
# Installs dependencies, builds reshard, and runs `reshard demo`: a small
# Llama with LoRA adapters sharded over 16 devices in a TPU slice's device
# order, saved, restored on another mesh, exported as a PEFT adapter and as a
# merged Hugging Face model, imported back, every tensor checked bit for bit.
# First with its 4 processes as threads of one, then as 4 MPI processes.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash scripts/build.sh release

./build/release/reshard demo

echo
echo "=== the same job as 4 MPI processes: mpirun -np 4 reshard demo ==="
if [ "$(id -u)" = 0 ]; then
  # Open MPI refuses to run as root unless told twice.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# --oversubscribe: 4 ranks even on a machine with fewer cores.
mpirun -np 4 --oversubscribe ./build/release/reshard demo
