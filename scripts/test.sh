#!/usr/bin/env bash
# Installs dependencies, then builds and runs every test: the release build,
# the ASan+UBSan build, the Python package's tests, and the fuzz targets for a
# bounded time. CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

# mpirun refuses root without these; CI and fresh machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

for preset in release asan; do
  echo "== build and test: $preset =="
  bash scripts/build.sh "$preset"
  ctest --preset "$preset" -j "$(nproc)"
done

echo "== python package =="
bash scripts/test-python.sh

if [[ -x scripts/fuzz.sh ]]; then
  echo "== fuzz =="
  bash scripts/fuzz.sh "${RESHARD_FUZZ_SECONDS:-60}"
fi
echo "all tests passed"
