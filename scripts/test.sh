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

# CI's machine has every capability a test may need (several ranks,
# pidfd_getfd, network namespaces, the object-store servers, root), and so has
# root's: there a test that would skip for want of one fails instead.
if [[ $EUID == 0 || -n ${CI:-} ]]; then
  export RESHARD_REQUIRE_ALL_CAPABILITIES=${RESHARD_REQUIRE_ALL_CAPABILITIES:-1}
fi

# Every skip, with its reason, listed at the end (also when a stage fails):
# from ctest's JUnit reports, with the output of passed tests kept (an mpirun
# job's gtests skip inside one passed ctest test), and pytest's.
reports=build/test-reports
rm -rf "$reports" && mkdir -p "$reports"
export GTEST_COLOR=no
trap 'python3 scripts/skip-summary.py release=$reports/release.xml asan=$reports/asan.xml python=$reports/python.xml' EXIT

for preset in release asan; do
  echo "== build and test: $preset =="
  bash scripts/build.sh "$preset"
  ctest --preset "$preset" -j "$(nproc)" --output-junit "$PWD/$reports/$preset.xml" --test-output-size-passed 1000000
done

echo "== python package =="
bash scripts/test-python.sh -rs --junitxml="$reports/python.xml"

if [[ -x scripts/fuzz.sh ]]; then
  echo "== fuzz =="
  bash scripts/fuzz.sh "${RESHARD_FUZZ_SECONDS:-60}"
fi
echo "all tests passed"
