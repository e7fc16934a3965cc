#!/usr/bin/env bash
# Open MPI's launch agent for scripts/netns-hosts.sh: where mpirun would ssh to
# HOST and run a command there, this runs it in the network namespace named
# HOST. Open MPI passes the host, then the command's words, which a remote
# shell would join and parse: so does this one.
set -euo pipefail
host=$1
shift
# ip netns keeps a namespace's handle at /run/netns/NAME. (Not `ip netns list
# | grep -q`: under pipefail, grep leaving at its first match kills the
# listing with SIGPIPE, now and then, and the launch with it.)
if [[ ! -e /run/netns/$host ]]; then
  echo "netns-agent: no network namespace '$host' (is scripts/netns-hosts.sh running?)" >&2
  exit 255
fi
# Each host gets session files of its own: the namespaces share one host name
# and one /tmp, and daemons making the same session folder at once failed
# ("mkdir ... File exists").
session=${TMPDIR:-/tmp}/$host.ompi
mkdir -p "$session"
exec ip netns exec "$host" env OMPI_MCA_orte_tmpdir_base="$session" /bin/sh -c "$*"
