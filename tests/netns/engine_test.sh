#!/usr/bin/env bash
# The engine's own MPI tests over real hosts: the seed's scenarios, random
# layout pairs round-tripped, a whole model moved in one batched exchange and
# back, a replicated array's holders sharing the sending; every byte checked by
# the tests themselves, here with ranks on 2 hosts of 2 (single copy within a
# host, TCP across, host relays) and on 4 hosts of 1 (TCP only).
# Usage: engine_test.sh RESHARD_BINARY EXECUTE_MPI_TESTS_BINARY; exit 77
# (skipped) where the machine refuses network namespaces.
set -euo pipefail
reshard=$1
engine_tests=$2
source "$(dirname "$0")/common.sh"

filter='*SeedScenarioMpi.*:SeedReplicatedMpi.*:ReshardRandomMpi.*:ModelBatchMpi.*:ReplicatedMoveMpi.*'
for layout in "2 2" "4 1"; do
  read -r host_count per_host <<<"$layout"
  log=$work/engine-$host_count.log
  timeout -k 5 300 bash "$hosts" run "$host_count" "$per_host" -- "$engine_tests" --gtest_filter="$filter" --gtest_color=no \
    >"$log" 2>&1 || fail "the engine's tests over $host_count hosts of $per_host exited $?: $(tail -30 "$log")"
  # The job's exit status speaks for every rank; rank 0 prints the summary.
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests from .* ran\..*/\1/p' "$log" | head -1)
  ((${ran:-0} >= 9)) || fail "only ${ran:-0} tests ran over $host_count hosts of $per_host: $(tail -30 "$log")"
  grep -q "^\[  PASSED  \] $ran tests" "$log" || fail "not all passed over $host_count hosts: $(tail -30 "$log")"
  echo "ok: the engine's $ran MPI tests (seed, random layouts, model batch, replicated) over $host_count hosts of $per_host"
done

check_nothing_left
