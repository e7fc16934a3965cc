#!/usr/bin/env bash
# A slow link is not a dead one: host 1's link throttled (tc's token bucket,
# scripts/netns-hosts.sh --rate) makes a job moving bytes between the hosts
# several times slower, but it completes, with a liveness timeout shorter
# than the whole transfer and longer than any gap in it: a peer whose bytes
# still arrive is never taken for dead.
# Usage: rate_test.sh RESHARD_BINARY; exit 77 (skipped) where the machine
# refuses network namespaces.
set -euo pipefail
reshard=$1
source "$(dirname "$0")/common.sh"

# The split benchmark on 8 MiB: half of it crosses between the two hosts in
# each of its some 48 moves, about 200 MiB in all.
export RESHARD_BENCH_ONLY=split RESHARD_BENCH_RESHARD_BYTES=$((8 << 20))
timeout_s=2

# Seconds (to the tenth) the job took; its JSON report in $work/$1.json.
run_bench() {
  local name=$1
  shift
  local start=$(date +%s%N) status=0
  timeout -k 5 120 bash "$hosts" run 2 1 "$@" -- "$reshard" bench reshard --timeout "$timeout_s" --json \
    >"$work/$name.json" 2>"$work/$name.log" || status=$?
  ((status == 0)) || fail "the $name job exited $status: $(tail -20 "$work/$name.log")"
  echo $((($(date +%s%N) - start) / 100000000))
}

fast=$(run_bench fast)
slow=$(run_bench slow --rate 100mbit)
echo "unthrottled: $((fast / 10)).$((fast % 10)) s; host 1 at 100 Mbit/s: $((slow / 10)).$((slow % 10)) s"
# 200 MiB at 100 Mbit/s is some 17 s, beside a few seconds unthrottled.
((slow >= 3 * timeout_s * 10)) || fail "the throttled job took only $slow tenths: the link was not slowed"
((slow >= 2 * fast)) || fail "the throttled job ($slow tenths) was not measurably slower than the other ($fast)"
# Each figure is of the same bytes: half the array crossed processes each time.
for name in fast slow; do
  python3 - "$work/$name.json" <<'PY' || fail "$name: the bytes between the hosts are wrong: $(head -c 2000 "$work/$name.json")"
import json, sys
figures = {f["name"]: f for f in json.load(open(sys.argv[1]))[0]["figures"]}
moved = figures["bytes between processes, split dimension change"]["value"] * 2**30
assert moved == 4 << 20, moved
PY
done
echo "ok: a link throttled to 100 Mbit/s makes the job slower, but it completes, the peer never taken for dead"

check_nothing_left
