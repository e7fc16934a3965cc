#!/usr/bin/env bash
# A host that cannot be reached when the job starts: its link cut just
# before the launch (scripts/netns-hosts.sh run --cut). The job must fail
# within a bounded time, non-zero, naming that host (and no other) by its
# address, before anything is written: the folder it was to write is never
# made.
# Usage: unreachable_test.sh RESHARD_BINARY; exit 77 (skipped) where the
# machine refuses network namespaces.
set -euo pipefail
reshard=$1
source "$(dirname "$0")/common.sh"

start=$(date +%s)
status=0
timeout -k 5 120 bash "$hosts" run 3 2 --cut 2 -- "$reshard" demo --out "$work/out" >"$work/job.log" 2>&1 || status=$?
took=$(($(date +%s) - start))
((status != 0)) || fail "the job with an unreachable host exited 0: $(tail -20 "$work/job.log")"
((status != 124 && status != 137)) || fail "the job with an unreachable host hung until the test's timeout"
((took <= 30)) || fail "the job took ${took} s to fail"
grep -q "netns-hosts: the job failed (exit $status), and host 2 ($RESHARD_NETNS_PREFIX-h2, 10.213.0.3) cannot reach host 0" \
  "$work/job.log" || fail "the unreachable host is not named: $(tail -20 "$work/job.log")"
! grep -q "host 1 (.*) cannot reach" "$work/job.log" || fail "a reachable host is named: $(tail -20 "$work/job.log")"
[[ ! -e $work/out ]] || fail "the job wrote before it failed: $(ls -la "$work/out")"
echo "ok: a host unreachable at the start fails the job in ${took} s (exit $status), naming it, with nothing written"

check_nothing_left
