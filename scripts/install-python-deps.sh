#!/usr/bin/env bash
# Creates the virtual environment .venv (Python 3.11, the machine's
# interpreter) with the exact pins of python/requirements.txt. Idempotent: an
# environment already holding those pins is left alone.
# Usage: scripts/install-python-deps.sh   (RESHARD_PYTHON overrides the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${RESHARD_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
venv=.venv
requirements=python/requirements.txt
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
   "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "install-python-deps: $venv up to date"
  exit 0
fi

if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "error: install-python-deps needs Python 3.11, $python is $("$python" --version 2>&1)" >&2
  exit 1
fi
echo "install-python-deps: creating $venv with $python"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" > "$stamp"
