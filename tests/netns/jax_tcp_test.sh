#!/usr/bin/env bash
# Jobs without mpirun: a JAX job of 2 namespace hosts of 2 processes
# (scripts/netns-hosts.sh --launcher tcp), each process started on its host by
# itself and calling jax.distributed.initialize() with host 0's address, its
# count and its index (4 CPU devices each). reshard.jax, given no transport,
# uses the job's own: TCP, met through JAX's key-value store
# (python/tests/jax_job.py). Random layout pairs match jax.device_put and
# numpy, to_host too; then host 1's link is cut mid-loop and every process
# ends, failing, each naming a peer across the cut.
# Usage: jax_tcp_test.sh RESHARD_BINARY PYTHON (the project's .venv, with the
# package installed); python/tests/test_netns_jobs.py runs it. Exit 77
# (skipped) where the machine refuses network namespaces.
set -euo pipefail
python=$2
source "$(dirname "$0")/common.sh"
job=$here/../../python/tests/jax_job.py

"$python" -c "import reshard.jax, jax" 2>"$work/import.log" ||
  fail "$python has no reshard package with jax: $(tail -1 "$work/import.log")"
seed=${RESHARD_SEED:-$RANDOM}
echo "RESHARD_SEED=$seed"

# Each process's JAX coordinator is the harness's (host 0), and its index and
# count the harness's rank and size; reshard's own variables are left out, so
# that nothing but the JAX job tells reshard where its peers are. $1: seconds
# before the job is deemed hung; then the phases.
jax_job() {
  local limit=$1
  shift
  timeout -k 5 "$limit" bash "$hosts" run 2 2 --launcher tcp -- sh -c 'exec env -u RESHARD_RANK -u RESHARD_SIZE -u RESHARD_COORDINATOR \
    JAX_JOB_COORDINATOR=$RESHARD_COORDINATOR JAX_JOB_PROCESSES=$RESHARD_SIZE JAX_JOB_PROCESS_ID=$RESHARD_RANK \
    RESHARD_LOG=debug "$0" "$@"' "$python" "$job" "$work" "$seed" "$@"
}

# 1. Layouts between the hosts against jax.device_put and numpy, to_host and from_host.
jax_job 150 layouts:30 >"$work/layouts.log" 2>&1 ||
  fail "the JAX job over 2 hosts exited $? (RESHARD_SEED=$seed): $(tail -30 "$work/layouts.log")"
(($(grep -c "^rank [0-3] ok layouts:30" "$work/layouts.log") == 4)) || fail "not every process passed: $(tail -30 "$work/layouts.log")"
(($(grep -c "reshard: transport tcp (rendezvous jax): rank " "$work/layouts.log") == 4)) ||
  fail "the job's transport is not TCP met through JAX: $(grep "reshard: transport" "$work/layouts.log")"
grep -Eq "rank [0-3] pairs 30 jax [1-9][0-9]* numpy-only [1-9]" "$work/layouts.log" || fail "no pairs counted"
echo "ok: a JAX job of 2 hosts without mpirun: 30 random layout pairs match jax.device_put and numpy, to_host too"

# 2. Host 1's link cut while the processes move arrays across it.
timeout_s=3
jax_job 120 cut:$timeout_s >"$work/cut.log" 2>&1 &
launched=$!
for ((tries = 0; ; tries++)); do
  (($(grep -c "^rank [0-3] looping" "$work/cut.log") == 4)) && break
  kill -0 "$launched" 2>/dev/null || fail "the job ended before its link was cut: $(tail -30 "$work/cut.log")"
  ((tries < 900)) || fail "the processes did not start looping in 90 s: $(tail -30 "$work/cut.log")"
  sleep 0.1
done
bash "$hosts" cut 1
cut_at=$(date +%s)
status=0
wait "$launched" || status=$?
took=$(($(date +%s) - cut_at))
((status != 0)) || fail "the job whose link was cut exited 0: $(tail -30 "$work/cut.log")"
((status != 124 && status != 137)) || fail "the job whose link was cut hung (a process never ended): $(tail -40 "$work/cut.log")"
((took <= timeout_s + 3 + 15)) || fail "the job took ${took} s to end after the cut: $(tail -40 "$work/cut.log")"
# Each process fails with reshard's error, naming a rank on the other side by its host's address.
for rank in 0 1 2 3; do
  peer_host=10.213.0.2
  ((rank < 2)) || peer_host=10.213.0.1
  python3 - "$work/cut.log" "$rank" "$peer_host" <<'PY' || fail "process $rank did not name a peer at $3: $(tail -60 "$work/cut.log")"
import re, sys
log, rank, peer_host = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
# The traceback of process R runs from its FAILED line to the next process's line.
failed = re.search(rf"^rank {rank} FAILED.*?(?=^rank \d (?:FAILED|looping)|\Z)", log, re.S | re.M)
assert failed, f"rank {rank} did not fail"
assert re.search(rf"reshard\.errors\.(TransportTimeoutError|PeerFailedError): .*rank [0-3].*{re.escape(peer_host)}",
                 failed.group(0)), failed.group(0)
PY
done
echo "ok: a link cut mid-loop ends every process of the JAX job in ${took} s (exit $status), each naming a peer across it"

check_nothing_left
