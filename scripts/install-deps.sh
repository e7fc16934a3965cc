#!/usr/bin/env bash
# Installs every Debian package reshard needs to build, test and benchmark,
# then the Python virtual environment (scripts/install-python-deps.sh).
# Idempotent: packages already present are left alone. Run as root on Debian 12.
set -euo pipefail

packages=(
  build-essential cmake ninja-build clang-14 libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev libssl-dev libcurl4-openssl-dev libtinyxml2-dev
  libopenmpi-dev openmpi-bin
  python3 python3-dev python3-venv ccache
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  if [[ $(id -u) -ne 0 ]]; then
    echo "error: install-deps needs root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

bash "$(dirname "$0")/install-python-deps.sh"
