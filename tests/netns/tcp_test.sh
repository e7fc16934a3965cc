#!/usr/bin/env bash
# Ranks on real hosts without mpirun: network namespaces joined by a bridge
# (scripts/netns-hosts.sh --launcher tcp), each process started on its host by
# itself with RESHARD_RANK/RESHARD_SIZE/RESHARD_COORDINATOR, as a TPU pod's or
# torchrun's are. The TCP transport finds the hosts (the plan crosses each
# once), the demo passes over the network, and a host that cannot be reached
# ends every process within the timeout, each naming what it could not reach.
# Usage: tcp_test.sh RESHARD_BINARY; exit 77 (skipped) where the machine
# refuses network namespaces.
set -euo pipefail
reshard=$1
source "$(dirname "$0")/common.sh"

# 1. The hosts and paths, 2 hosts of 2 ranks.
timeout -k 5 120 bash "$hosts" run 2 2 --launcher tcp -- "$reshard" plan --shape 64 --dtype f32 --src-mesh d=4 \
  --src-spec d --dst-mesh d=4 --dst-spec None --json >"$work/plan.json" 2>"$work/plan.log" ||
  fail "reshard plan over 2 hosts exited $?: $(cat "$work/plan.log")"
python3 - "$work/plan.json" <<'PY' || fail "the hosts or paths are wrong: $(cat "$work/plan.json")"
import json, sys
plan = json.load(open(sys.argv[1]))
host = lambda rank: rank // 2
for a in range(4):
    for b in range(4):
        want = "self" if a == b else ("single copy" if host(a) == host(b) else "TCP (other host)")
        assert plan["paths"][a][b] == want, (a, b, plan["paths"][a][b], want)
assert plan["hosts"] == 2 and plan["host_of_process"] == [0, 0, 1, 1], plan
assert plan["bytes_cross_host"] == 256, plan
PY
echo "ok: the TCP transport tells the namespace hosts apart (a single copy within each); the plan crosses each host once"

# 2. The demo over the network, every byte checked by the demo itself.
timeout -k 5 300 bash "$hosts" run 2 2 --launcher tcp -- "$reshard" demo --json >"$work/demo.json" \
  2>"$work/demo.log" || fail "reshard demo over 2 hosts exited $?: $(tail -20 "$work/demo.log")"
python3 - "$work/demo.json" <<'PY' || fail "demo: $(cat "$work/demo.json")"
import json, sys
demo = json.load(open(sys.argv[1]))
assert demo["job"] == {"transport": "tcp", "rendezvous": "reshard", "processes": 4}, demo["job"]
assert all(check["mismatches"] == 0 for check in demo["checks"]), demo["checks"]
PY
echo "ok: reshard demo over 2 hosts of 2 ranks, without mpirun"

# 3. Host 1's link cut before the start: every process ends within the
# timeout, the coordinator naming the ranks that never arrived and host 1's
# ranks the coordinator they could not reach; nothing is written.
start=$(date +%s)
status=0
timeout -k 5 120 bash "$hosts" run 2 2 --cut 1 --launcher tcp -- "$reshard" demo --timeout 5 --out "$work/out" \
  >"$work/cut.log" 2>&1 || status=$?
took=$(($(date +%s) - start))
((status != 0)) || fail "the job with an unreachable host exited 0: $(tail -20 "$work/cut.log")"
((status != 124 && status != 137)) || fail "the job with an unreachable host hung: $(tail -20 "$work/cut.log")"
((took <= 40)) || fail "the job took ${took} s to fail"
grep -q "rank(s) 2, 3 did not arrive" "$work/cut.log" || fail "rank 0 does not name the missing ranks: $(cat "$work/cut.log")"
(($(grep -c "could not reach the coordinator (rank 0) at 10.213.0.1:" "$work/cut.log") == 2)) ||
  fail "host 1's ranks do not name the coordinator: $(cat "$work/cut.log")"
[[ ! -e $work/out ]] || fail "the job wrote before it failed"
echo "ok: a host unreachable at the start ends every process in ${took} s (exit $status), naming what is missing"

# 4. Host 1's link cut while the job moves data over it (a slowed link, so it
# surely is): every process ends within the timeout and a bound, each naming
# a peer on the other side as silent or gone.
start=$(date +%s)
status=0
timeout -k 5 120 bash "$hosts" run 2 2 --rate 20mbit --launcher tcp -- "$reshard" demo --timeout 5 --layers 16 \
  --embed 512 --mlp 2048 --vocab 8192 >"$work/midcut.log" 2>&1 &
job=$!
# Once host 1's ranks run (and so have joined or are joining the job).
for _ in $(seq 1 200); do
  pids=$(ip netns pids "$RESHARD_NETNS_PREFIX-h1" 2>/dev/null || true)
  [[ -n $pids ]] && ps -o comm= -p $pids 2>/dev/null | grep -q reshard && break
  sleep 0.05
done
sleep 1.5
bash "$hosts" cut 1 || fail "the job ended before its link was cut: $(tail -20 "$work/midcut.log")"
wait "$job" || status=$?
took=$(($(date +%s) - start))
((status != 0)) || fail "the job whose link was cut exited 0: $(tail -20 "$work/midcut.log")"
((status != 124 && status != 137)) || fail "the job whose link was cut hung: $(tail -30 "$work/midcut.log")"
((took <= 45)) || fail "the job took ${took} s to end after its link was cut"
grep -Eq "rank [23] \(.*10\.213\.0\.2:[0-9]+\) (has been silent|left the job)" "$work/midcut.log" ||
  fail "host 0 does not name a rank of host 1: $(tail -30 "$work/midcut.log")"
grep -Eq "rank [01] \(.*10\.213\.0\.1:[0-9]+\) (has been silent|left the job)|the coordinator, rank 0" "$work/midcut.log" ||
  fail "host 1 does not name a rank of host 0: $(tail -30 "$work/midcut.log")"
echo "ok: a link cut mid-job ends every process in ${took} s (exit $status), each naming a peer across it"

check_nothing_left
