#!/usr/bin/env bash
# Builds the Python extension with AddressSanitizer + UndefinedBehaviorSanitizer
# (into build/python-asan, installed to build/python-asan/site) and runs the
# Python tests against it with the sanitizer runtimes preloaded into the
# interpreter. Slower than scripts/test-python.sh; not part of CI's run.
# Usage: scripts/test-python-asan.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-python-deps.sh
if command -v ccache >/dev/null && [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]]; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
site=build/python-asan/site
echo "== python (asan): build =="
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  --upgrade --target "$site" . \
  --config-settings=build-dir=build/python-asan/build \
  --config-settings=cmake.define.RESHARD_SANITIZE=ON \
  --config-settings=cmake.build-type=RelWithDebInfo

echo "== python (asan): test =="
status=0
PYTHONPATH="$PWD/$site" \
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  .venv/bin/python -m pytest -p no:cacheprovider -q python/tests "$@" || status=$?
if ((status == 5)); then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
