#!/usr/bin/env bash
# Ranks on real hosts: network namespaces joined by a bridge
# (scripts/netns-hosts.sh), Open MPI's TCP transport between them. Each host's
# ranks reach each other by a single copy and the other host's through MPI,
# and the seed's whole story (reshard demo) passes over the network.
# Usage: hosts_test.sh RESHARD_BINARY; exit 77 (skipped) where the machine
# refuses network namespaces.
set -euo pipefail
reshard=$1
source "$(dirname "$0")/common.sh"

# 1. Which path each rank takes to each other, 2 hosts of 2 ranks.
timeout -k 5 120 bash "$hosts" run 2 2 -- "$reshard" plan --shape 64 --dtype f32 --src-mesh d=4 --src-spec d \
  --dst-mesh d=4 --dst-spec None --json >"$work/plan.json" 2>"$work/plan.log" ||
  fail "reshard plan over 2 hosts exited $?: $(cat "$work/plan.log")"
python3 - "$work/plan.json" <<'PY' || fail "the paths between hosts are wrong: $(cat "$work/plan.json")"
import json, sys
plan = json.load(open(sys.argv[1]))
paths = plan["paths"]
host = lambda rank: rank // 2
for a in range(4):
    for b in range(4):
        want = "self" if a == b else ("shared memory" if host(a) == host(b) else "MPI (other host)")
        assert paths[a][b] == want, (a, b, paths[a][b], want)
# The plan knows the hosts: each takes the half it lacks across once.
assert plan["hosts"] == 2 and plan["host_of_process"] == [0, 0, 1, 1], plan
assert plan["min_bytes_into_hosts"] == [128, 128] and plan["bytes_cross_host"] == 256, plan
assert any(t["stage"] == 2 for t in plan["transfers"]), plan
PY
echo "ok: ranks of one host copy directly, ranks of different hosts go through MPI; the plan crosses each host once"

# 2. The demo over the network, every byte checked by the demo itself: the
# seed's reshards, a checkpoint saved and restored onto another mesh, a PEFT
# adapter and a merged model exported and imported back; over 2 hosts of 2
# ranks (relays between each host's ranks) and over 4 hosts of 1.
timeout -k 5 300 bash "$hosts" run 2 2 -- "$reshard" demo --out "$work/demo" >"$work/demo.log" 2>&1 ||
  fail "reshard demo over 2 hosts exited $?: $(tail -20 "$work/demo.log")"
grep -q "^ok: every tensor of every step equals the reference" "$work/demo.log" || fail "demo: $(tail -5 "$work/demo.log")"
echo "ok: reshard demo over 2 hosts of 2 ranks"
timeout -k 5 300 bash "$hosts" run 4 1 -- "$reshard" demo >"$work/demo4.log" 2>&1 ||
  fail "reshard demo over 4 hosts exited $?: $(tail -20 "$work/demo4.log")"
grep -q "^ok: every tensor of every step equals the reference" "$work/demo4.log" || fail "demo: $(tail -5 "$work/demo4.log")"
echo "ok: reshard demo over 4 hosts of 1 rank"

# 3. A link cut mid-transfer: host 1's cable pulled while reshards of 1 GiB
# move between the hosts again and again (the bench's loop: every wait in it is
# reshard's, none a bare MPI call that could block on the dead link). Rank 0 fails naming rank 1 and its host (by address) once it
# has been silent for --timeout; every rank ends; mpirun, which waits forever
# for the daemon it cannot reach, is reported and killed; the job fails. All within the timeout, the failure
# grace (3 s), the launcher's grace (5 s here) and a margin.
export RESHARD_NETNS_LAUNCHER_GRACE=5
RESHARD_BENCH_ONLY=loop timeout -k 5 120 bash "$hosts" run 2 1 -- "$reshard" bench reshard --timeout 4 \
  >"$work/cut.log" 2>&1 &
job=$!
sleep 6
bash "$hosts" cut 1
cut_at=$(date +%s)
status=0
wait "$job" || status=$?
took=$(($(date +%s) - cut_at))
((status != 0)) || fail "the job with a cut link exited 0: $(tail -5 "$work/cut.log")"
((took <= 4 + 3 + 5 + 15)) || fail "the job took ${took} s to end after the cut"
# The hosts share one host name: the address tells host 1 apart.
grep -qE "rank 0: rank 1 has been silent for [0-9]+ ms \(timeout 4000 ms\) on host 1 \($(hostname), 10\.213\.0\.2\) while" \
  "$work/cut.log" || fail "rank 0 did not name rank 1 and its host: $(tail -20 "$work/cut.log")"
grep -q "every rank has ended, but mpirun is still waiting" "$work/cut.log" ||
  fail "the launcher's fate is not reported: $(tail -20 "$work/cut.log")"
echo "ok: a cut link ends every rank and the job ${took} s after the cut, naming the silent rank and its host"

# 4. Nothing left behind.
check_nothing_left
