#!/usr/bin/env bash
# Installs dependencies, builds reshard, and runs the demo: the layout of the
# seed scenario (a 4x4 mesh in TPU device order) as reshard sees it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash scripts/build.sh release

./build/release/reshard show --mesh data=4,model=4 \
  --devices 0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15 --spec 'None,data' --shape 8,4096
