# Sourced by the tests of this folder, after `set -euo pipefail` and with
# $reshard set: $hosts (the harness), a prefix of this test's own, $work (a
# folder removed on exit), fail. Exits 77 (skipped) where the machine refuses
# network namespaces, 1 (failed) there under RESHARD_REQUIRE_ALL_CAPABILITIES=1.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
hosts=$here/../../scripts/netns-hosts.sh
# A prefix of its own, so that tests running at once never share a namespace;
# the hosts of an earlier run that was killed before it could clean up (its
# process is gone) are removed first.
for stale in $(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^rst\([0-9][0-9]*\)-.*/\1/p' | sort -u); do
  kill -0 "$stale" 2>/dev/null || RESHARD_NETNS_PREFIX=rst$stale bash "$hosts" down
done
export RESHARD_NETNS_PREFIX=rst$$
status=0
bash "$hosts" check || status=$?
if ((status == 77)); then
  # CI's machine (and root's) can: there a skip would pass what it never ran.
  if [[ ${RESHARD_REQUIRE_ALL_CAPABILITIES:-} == 1 ]]; then
    echo "FAILED: RESHARD_REQUIRE_ALL_CAPABILITIES=1 says this machine can make network namespaces, but it cannot" >&2
    exit 1
  fi
  echo "skipped: this machine cannot make network namespaces"
  exit 77
fi
((status == 0)) || exit "$status"
work=$(mktemp -d)
# The harness removes its hosts when its job ends; a test stopped part-way
# (a failed check with hosts still up) removes them here.
# RESHARD_NETNS_KEEP=1 keeps $work, the jobs' logs, to see why one failed.
trap 'bash "$hosts" down; [[ -n ${RESHARD_NETNS_KEEP:-} ]] || rm -rf "$work"' EXIT

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# Fails unless no namespace of this test's prefix is left.
check_nothing_left() {
  local left
  left=$(ip netns list | awk '{print $1}' | grep -c "^$RESHARD_NETNS_PREFIX-" || true)
  ((left == 0)) || fail "$left namespaces left behind"
  echo "ok: no namespace left"
}
