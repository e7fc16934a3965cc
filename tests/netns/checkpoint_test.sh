#!/usr/bin/env bash
# Checkpoints across hosts. A model saved by 2 hosts of 2 ranks is restored
# by 4 hosts of 1 rank, every byte checked. Then two saves are broken part-way,
# while their data files are being written: host 1's link cut (a new
# checkpoint beside the first), and host 1's ranks killed (the first one
# replaced, --force). Each time every rank ends within the timeout and a
# bound, the job fails, the checkpoint being saved never appears, and the
# first one still restores intact.
# Usage: checkpoint_test.sh RESHARD_BINARY; exit 77 (skipped) where the
# machine refuses network namespaces.
set -euo pipefail
reshard=$1
source "$(dirname "$0")/common.sh"

export RESHARD_NETNS_LAUNCHER_GRACE=5
timeout_s=4
# 2 GiB: a save that lasts a few seconds here, long enough to break midway.
python3 "$here/make_model.py" "$work/model.safetensors" 2048

# Restores checkpoint $1 on $2 hosts of $3 ranks into one file and checks
# every tensor's bytes against the model's.
restores_intact() {
  local checkpoint=$1 host_count=$2 per_host=$3
  rm -f "$work/restored.safetensors"
  timeout -k 5 120 bash "$hosts" run "$host_count" "$per_host" -- "$reshard" convert "$checkpoint" \
    "$work/restored.safetensors" >"$work/restore.log" 2>&1 ||
    fail "restoring $checkpoint on $host_count hosts of $per_host exited $?: $(tail -20 "$work/restore.log")"
  python3 "$here/same_tensors.py" "$work/model.safetensors" "$work/restored.safetensors" ||
    fail "$checkpoint restored on $host_count hosts of $per_host differs from the model"
  rm -f "$work/restored.safetensors"
}

# 1. Saved on 2 hosts of 2 ranks, restored on 4 hosts of 1.
timeout -k 5 120 bash "$hosts" run 2 2 -- "$reshard" convert "$work/model.safetensors" "$work/ckpt" \
  --mesh d=4 --best-effort d >"$work/save.log" 2>&1 || fail "the save exited $?: $(tail -20 "$work/save.log")"
restores_intact "$work/ckpt" 4 1
"$reshard" verify "$work/ckpt" >/dev/null || fail "reshard verify refuses the checkpoint"
manifest=$(sha256sum <"$work/ckpt/manifest.json")
echo "ok: a checkpoint saved on 2 hosts of 2 ranks restores on 4 hosts of 1, every byte"

# Starts a save of the model (bf16: a different checkpoint) to $1 on 2 hosts
# of 2 ranks, with extra arguments $2..., in the background ($job, output in
# $work/broken.log); returns once its staging folder has been there a little
# while: its data files are being written.
start_save() {
  local to=$1
  shift
  local staging
  staging=$(dirname "$to")/.$(basename "$to").tmp-reshard-ckpt
  timeout -k 5 120 bash "$hosts" run 2 2 -- "$reshard" convert "$work/model.safetensors" "$to" --mesh d=4 \
    --best-effort d --dtype bf16 --timeout "$timeout_s" "$@" >"$work/broken.log" 2>&1 &
  job=$!
  local tries
  for ((tries = 0; tries < 300; tries++)); do
    [[ -d $staging ]] && break
    kill -0 "$job" 2>/dev/null || fail "the save ended before it began writing: $(tail -20 "$work/broken.log")"
    sleep 0.05
  done
  [[ -d $staging ]] || fail "the save's staging folder never appeared"
  sleep 0.5
  kill -0 "$job" 2>/dev/null || fail "the save ended before it could be broken: $(tail -20 "$work/broken.log")"
}

# Waits for the broken save (in this shell: the job is its child): it must
# fail within $1 s of the fault. Sets $took.
expect_failure_within() {
  local bound=$1 at status=0
  at=$(date +%s)
  wait "$job" || status=$?
  took=$(($(date +%s) - at))
  ((status != 0)) || fail "the broken save exited 0: $(tail -20 "$work/broken.log")"
  ((took <= bound)) || fail "the broken save took ${took} s to end (at most ${bound}): $(tail -20 "$work/broken.log")"
}

# The first checkpoint is untouched and still restores.
first_is_intact() {
  [[ $(sha256sum <"$work/ckpt/manifest.json") == "$manifest" ]] || fail "the first checkpoint's manifest changed"
  restores_intact "$work/ckpt" 1 1
}

# 2. Host 1's link cut mid-save, to a new checkpoint beside the first: the
# timeout, the failure grace (3 s), the launcher's grace and a margin.
start_save "$work/ckpt-cut"
bash "$hosts" cut 1
expect_failure_within $((timeout_s + 3 + RESHARD_NETNS_LAUNCHER_GRACE + 15))
grep -q "has been silent for [0-9]* ms (timeout 4000 ms) on host [01] " "$work/broken.log" ||
  fail "the cut save does not name the silent host: $(tail -20 "$work/broken.log")"
[[ ! -e $work/ckpt-cut ]] || fail "the cut save left $work/ckpt-cut: $(ls -la "$work/ckpt-cut")"
grep -m1 "has been silent" "$work/broken.log" | cut -c1-300
first_is_intact
echo "ok: a link cut mid-save fails it ${took} s later, nothing appears, the first checkpoint restores intact"

# 3. Host 1's ranks killed mid-save, replacing the first checkpoint.
start_save "$work/ckpt" --force
pids=$(ip netns pids "$RESHARD_NETNS_PREFIX-h1")
killed=0
for pid in $pids; do
  [[ $(ps -o comm= -p "$pid" 2>/dev/null) == reshard ]] && kill -9 "$pid" && killed=$((killed + 1))
done
((killed == 2)) || fail "killed $killed ranks of host 1, not 2"
expect_failure_within $((timeout_s + 3 + RESHARD_NETNS_LAUNCHER_GRACE + 15))
grep -m1 -iE "error|killed|signal" "$work/broken.log" | cut -c1-300
first_is_intact
echo "ok: host 1's ranks killed mid-save fail it ${took} s later, and the checkpoint it was replacing restores intact"

check_nothing_left
