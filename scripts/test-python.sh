#!/usr/bin/env bash
# Builds the Python package into .venv (pip install ., reusing the pinned build
# dependencies there and the incremental build folder build/python) and runs
# its tests with pytest. Usage: scripts/test-python.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-python-deps.sh

if command -v ccache >/dev/null && [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]]; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
echo "== python: build =="
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps .

echo "== python: test =="
# Run from the tests' folder so `import reshard` finds the installed package,
# not the source folder.
status=0
.venv/bin/python -m pytest -p no:cacheprovider -q python/tests "$@" || status=$?
if ((status == 5)); then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
