#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset, clang) and runs each for a
# bounded time from its seed corpus. Fails on any finding (crash, sanitizer
# report, broken invariant, timeout, memory blow-up).
# Usage: scripts/fuzz.sh [SECONDS per target, default 60] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(safetensors_header_fuzzer hf_index_fuzzer checkpoint_manifest_fuzzer)
fi

bash scripts/build.sh fuzz

work=build/fuzz/runs
for target in "${targets[@]}"; do
  echo "== fuzz: $target for ${seconds}s =="
  # New inputs go to a scratch corpus, never into the committed seeds.
  mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
  dict=()
  [[ -f fuzz/dict/$target.dict ]] && dict=(-dict="fuzz/dict/$target.dict")
  "build/fuzz/fuzz/$target" "$work/$target/corpus" "fuzz/corpus/$target" \
    -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$work/$target/artifacts/" -print_final_stats=1 "${dict[@]}"
done
echo "fuzz: no findings"
