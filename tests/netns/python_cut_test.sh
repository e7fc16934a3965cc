#!/usr/bin/env bash
# A failed job ends, in Python too: Python ranks under mpirun on 2 namespace
# hosts of 2 ranks (scripts/netns-hosts.sh) reshard an array back and forth
# (python/tests/lost_peer_job.py) until host 1's link is cut. Every rank, on
# either side, raises within the transport's timeout naming a rank across the
# cut by its host's address, every rank ends, and the job fails within the
# timeout and a bound, whether the transport is reshard's, made from an mpi4py
# communicator, or made in a JAX job (jax.distributed, 4 CPU devices per
# process, gloo collectives).
# Usage: python_cut_test.sh RESHARD_BINARY PYTHON (the project's .venv, with
# the package installed); python/tests/test_netns_python_cut.py runs it. Exit
# 77 (skipped) where the machine refuses network namespaces.
set -euo pipefail
python=$2
source "$(dirname "$0")/common.sh"
job=$here/../../python/tests/lost_peer_job.py

"$python" -c "import reshard.mpi, mpi4py, jax; assert reshard.mpi.available()" 2>"$work/import.log" ||
  fail "$python has no reshard package with MPI, mpi4py and jax: $(tail -1 "$work/import.log")"

timeout_s=3
# mpirun waits forever for the daemon across the cut: the harness ends it
# this long after every rank has ended.
export RESHARD_NETNS_LAUNCHER_GRACE=4

# $1: where the transport comes from (reshard, mpi4py, jax).
cut_mid_job() {
  local source=$1 dir=$work/$1
  mkdir -p "$dir/pids" "$dir/said"
  timeout -k 5 150 bash "$hosts" run 2 2 -- env RESHARD_TEST_SAID_DIR="$dir/said" JAX_PLATFORMS=cpu \
    XLA_FLAGS=--xla_force_host_platform_device_count=4 "$python" "$job" cut "$source" "$timeout_s" "$dir/pids" \
    >"$dir/job.log" 2>&1 &
  local launched=$! rank tries
  # Once every rank moves data in its loop (a JAX runtime takes seconds to start).
  for ((tries = 0; ; tries++)); do
    (($(cat "$dir"/said/*.log 2>/dev/null | grep -c "looping") == 4)) && break
    kill -0 "$launched" 2>/dev/null || fail "$source: the job ended before its link was cut: $(tail -20 "$dir/job.log")"
    ((tries < 900)) || fail "$source: the ranks did not start looping in 90 s: $(tail -20 "$dir/job.log")"
    sleep 0.1
  done
  bash "$hosts" cut 1
  local cut_at status=0
  cut_at=$(date +%s)
  wait "$launched" || status=$?
  local took=$(($(date +%s) - cut_at))
  ((status != 0)) || fail "$source: the job whose link was cut exited 0: $(tail -20 "$dir/job.log")"
  ((status != 124)) || fail "$source: the job whose link was cut hung: $(tail -30 "$dir/job.log")"
  # mpirun waits for the daemon across the cut forever: the harness kills it
  # (137), but only once every rank has ended by itself.
  ((status != 137)) || grep -q "every rank has ended, but mpirun is still waiting" "$dir/job.log" ||
    fail "$source: the job was killed before every rank had ended: $(tail -30 "$dir/job.log")"
  # The timeout, the failure's own grace, the launcher's grace and a margin.
  ((took <= timeout_s + 3 + RESHARD_NETNS_LAUNCHER_GRACE + 15)) || fail "$source: the job took ${took} s to end after the cut"
  for rank in 0 1 2 3; do
    local peer_host=10.213.0.2
    ((rank < 2)) || peer_host=10.213.0.1
    # Host 1's ranks can no longer print through mpirun: each wrote what it said to a file too.
    grep -Eq "^rank $rank raised (TransportTimeoutError|PeerFailedError): .*rank [0-3].*$peer_host" \
      "$dir/said/$rank.log" 2>/dev/null ||
      fail "$source: rank $rank did not raise naming a rank at $peer_host: $(cat "$dir/said/$rank.log" 2>/dev/null)
$(tail -20 "$dir/job.log")"
  done
  echo "ok: $source: a link cut mid-job: every Python rank raised naming a rank across it; the job ended in ${took} s (exit $status)"
}

cut_mid_job reshard
cut_mid_job mpi4py
cut_mid_job jax
check_nothing_left
