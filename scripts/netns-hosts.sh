#!/usr/bin/env bash
# Real hosts on one machine: network namespaces joined by a private bridge,
# each with its own address, and an MPI job launched across them whose bytes
# between "hosts" go through a real network stack (Open MPI's TCP transport).
#
# Usage (as root):
#   scripts/netns-hosts.sh run HOSTS RANKS_PER_HOST [--rate RATE] [--cut HOST] [--launcher tcp] -- COMMAND [ARGS...]
#       makes the hosts, runs `mpirun -np HOSTS*RANKS_PER_HOST COMMAND ARGS` from
#       the first, removes everything (also when the job fails or is
#       interrupted) and exits with the job's status. --rate (a tc rate such
#       as 50mbit) slows the last host's link; --cut takes host HOST's link
#       down just before the launch (a host unreachable from the start). A
#       job that fails says which hosts cannot reach the first one.
#       --launcher tcp starts the ranks as a TPU pod or torchrun would, without
#       mpirun: each process on its host by itself, told RESHARD_RANK,
#       RESHARD_SIZE and RESHARD_COORDINATOR (host 0); the status is the
#       first non-zero one of the ranks.
#   scripts/netns-hosts.sh up HOSTS     make the hosts and leave them up
#   scripts/netns-hosts.sh down         remove them (and any process left in them)
#   scripts/netns-hosts.sh exec HOST COMMAND...   run a command on host HOST (0-based)
#   scripts/netns-hosts.sh cut HOST     take host HOST's link down (a cable pulled)
#   scripts/netns-hosts.sh check        exit 0 if this machine can make them, else say why, exit 77
#
# Names start with RESHARD_NETNS_PREFIX (default "rs"): the hosts are
# namespaces $PREFIX-h0, $PREFIX-h1, ... with addresses 10.213.0.1, .2, ...
# on a bridge inside namespace $PREFIX-sw. Nothing is added to the machine's
# own network namespace: no address, no route, no link.
#
# Examples:
#   scripts/netns-hosts.sh run 2 2 -- build/release/reshard demo
#   scripts/netns-hosts.sh run 4 1 --rate 100mbit -- build/release/reshard bench reshard
set -euo pipefail

prefix=${RESHARD_NETNS_PREFIX:-rs}
subnet=10.213.0
switch=$prefix-sw
here=$(cd "$(dirname "$0")" && pwd)

host_ns() { echo "$prefix-h$1"; }

die() {
  echo "netns-hosts: $*" >&2
  exit 1
}

check() {
  if [[ $(id -u) != 0 ]]; then
    echo "netns-hosts: needs root (network namespaces need CAP_NET_ADMIN)" >&2
    return 77
  fi
  command -v ip >/dev/null || { echo "netns-hosts: no ip command (iproute2)" >&2; return 77; }
  local probe=$prefix-probe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "netns-hosts: this machine refuses network namespaces (ip netns add failed)" >&2
    return 77
  fi
  local ok=0
  ip netns exec "$probe" ip link add probe0 type veth peer name probe1 2>/dev/null || ok=77
  ip netns del "$probe"
  ((ok == 0)) || echo "netns-hosts: this machine refuses veth links inside a namespace" >&2
  return "$ok"
}

# Every namespace of this prefix, the switch included.
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(sw|h[0-9]+)$" || true; }

down() {
  local ns
  for ns in $(our_namespaces); do
    # Processes still running in a host (a rank that never exited) go with it.
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  done
  for ns in $(our_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf /etc/netns/"$prefix"-*
  rm -rf "${TMPDIR:-/tmp}/$prefix"-*.ompi
}

up() {
  local hosts=$1
  [[ $hosts =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= 200)) || die "HOSTS must be 1..200, not '$hosts'"
  [[ -z $(our_namespaces) ]] || die "namespaces with prefix '$prefix' exist already (scripts/netns-hosts.sh down removes them)"
  ip netns add "$switch"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  local i ns
  for ((i = 0; i < hosts; i++)); do
    ns=$(host_ns "$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # The pair is made inside the host, then one end moves to the switch.
    ip -n "$ns" link add eth0 type veth peer name "port$i"
    ip -n "$ns" link set "port$i" netns "$switch"
    ip -n "$switch" link set "port$i" master br0 up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

limit_rate() {
  local host=$1 rate=$2
  # Both directions: the host's sends (its eth0) and what the switch sends it.
  ip netns exec "$(host_ns "$host")" tc qdisc add dev eth0 root tbf rate "$rate" burst 64kbit latency 400ms
  ip netns exec "$switch" tc qdisc add dev "port$host" root tbf rate "$rate" burst 64kbit latency 400ms
}

# Whether host $1 reaches host 0: a TCP connection to a closed port there is
# refused (an answer came back) rather than lost.
reaches_first_host() {
  local answer
  answer=$(timeout 2 ip netns exec "$(host_ns "$1")" bash -c "exec 3<>/dev/tcp/$subnet.1/9" 2>&1 || true)
  [[ $answer == *refused* ]]
}

# Links come up asynchronously (a veth's carrier, the bridge port): a daemon
# launched before its host can reach the first one fails to call back and
# mpirun waits for it forever. So every host must reach host 0 first.
wait_until_connected() {
  local hosts=$1 i tries
  for ((i = 1; i < hosts; i++)); do
    for ((tries = 0; ; tries++)); do
      reaches_first_host "$i" && break
      ((tries < 50)) || die "host $i cannot reach host 0 after 10 s"
      sleep 0.2
    done
  done
}

cut() { ip -n "$(host_ns "$1")" link set eth0 down; }

run() {
  local hosts=$1 per_host=$2
  shift 2
  local rate="" unreachable="" launcher_kind=mpirun
  while (($#)) && [[ $1 != -- ]]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      --cut) unreachable=$2; shift 2 ;;
      --launcher) launcher_kind=$2; shift 2 ;;
      *) die "unknown option '$1'" ;;
    esac
  done
  [[ ${1:-} == -- ]] || die "run HOSTS RANKS_PER_HOST [--rate RATE] [--cut HOST] -- COMMAND [ARGS...]"
  shift
  (($#)) || die "no command to run"
  [[ $per_host =~ ^[0-9]+$ ]] && ((per_host >= 1)) || die "RANKS_PER_HOST must be 1 or more, not '$per_host'"
  trap down EXIT
  trap 'exit 130' INT TERM
  up "$hosts"
  wait_until_connected "$hosts"
  [[ -z $rate ]] || limit_rate "$((hosts - 1))" "$rate"
  [[ -z $unreachable ]] || cut "$unreachable"
  if [[ $launcher_kind == tcp ]]; then
    run_without_launcher "$hosts" "$per_host" "$@"
    return
  fi
  [[ $launcher_kind == mpirun ]] || die "--launcher takes mpirun or tcp, not '$launcher_kind'"
  local hostfile
  hostfile=$(mktemp)
  local i
  # Names the launch agent maps back to namespaces: mpirun finds none of them
  # local, so every host's daemon starts through the agent, in its namespace.
  # The daemons stay attached to their agents: daemonized (the default), one
  # in thirty or so vanished before calling back, and mpirun waited forever.
  # Several daemons share this machine's memory map, and each writing the
  # hwloc topology to a shared segment crashed one of them now and then:
  # rtc_hwloc_vmhole=none leaves that sharing out.
  for ((i = 0; i < hosts; i++)); do echo "$(host_ns "$i") slots=$per_host" >>"$hostfile"; done
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ip netns exec "$(host_ns 0)" mpirun -np $((hosts * per_host)) --hostfile "$hostfile" --oversubscribe \
    --mca plm_rsh_agent "$here/netns-agent.sh" --mca plm_rsh_no_tree_spawn 1 --leave-session-attached --mca rtc_hwloc_vmhole none \
    --mca oob_tcp_if_include "$subnet.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$subnet.0/24" \
    -x RESHARD_NETNS_PREFIX="$prefix" "$@" &
  local launcher=$!
  watch_launcher "$launcher" "$hosts"
  local status=0
  wait "$launcher" || status=$?
  rm -f "$hostfile"
  ((status == 0)) || say_unreachable "$hosts" "$status"
  return "$status"
}

# Each rank started on its host by itself, rank r on host r / RANKS_PER_HOST,
# the coordinator (rank 0) on host 0; no process waits on another to start.
# Each host's name resolves to its own address inside it, as on real hosts
# (ip netns exec puts /etc/netns/NS/hosts over /etc/hosts): programs that
# announce their host by name, such as JAX's gloo collectives, are then
# reachable from the other hosts. Only for the ranks started here, not for
# mpirun's daemons, which are given addresses.
name_hosts() {
  local hosts=$1 i ns
  for ((i = 0; i < hosts; i++)); do
    ns=$(host_ns "$i")
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s %s\n' "$subnet.$((i + 1))" "$(hostname)" >"/etc/netns/$ns/hosts"
  done
}

run_without_launcher() {
  local hosts=$1 per_host=$2
  shift 2
  local port=$((20000 + RANDOM % 20000)) size=$((hosts * per_host)) rank status=0 pids=()
  name_hosts "$hosts"
  for ((rank = 0; rank < size; rank++)); do
    ip netns exec "$(host_ns $((rank / per_host)))" env RESHARD_RANK=$rank RESHARD_SIZE=$size \
      RESHARD_COORDINATOR="$subnet.1:$port" RESHARD_NETNS_PREFIX="$prefix" "$@" &
    pids+=($!)
  done
  for rank in "${!pids[@]}"; do
    local one=0
    wait "${pids[$rank]}" || one=$?
    ((status != 0)) || status=$one
  done
  ((status == 0)) || say_unreachable "$hosts" "$status"
  return "$status"
}

# After a failed job: which hosts cannot reach host 0, where mpirun runs.
# Open MPI's own account of a daemon that could not call back names neither
# host ("Local host: vm, Remote host: vm": they share one host name).
say_unreachable() {
  local hosts=$1 status=$2 i
  for ((i = 1; i < hosts; i++)); do
    reaches_first_host "$i" || echo "netns-hosts: the job failed (exit $status), and host $i" \
      "($(host_ns "$i"), $subnet.$((i + 1))) cannot reach host 0 ($subnet.1), where mpirun runs: its link is down" >&2
  done
}

# Whether a process of the job itself (not mpirun, a daemon or a shell) runs on any host.
ranks_running() {
  local hosts=$1 i pid
  for ((i = 0; i < hosts; i++)); do
    for pid in $(ip netns pids "$(host_ns "$i")" 2>/dev/null); do
      case $(ps -o comm= -p "$pid" 2>/dev/null) in
        mpirun | orted | sh | bash | ip | netns-agent.sh | "") ;;
        *) return 0 ;;
      esac
    done
  done
  return 1
}

# The launcher's fate: once every rank has ended, mpirun should too. One that
# still waits $launcher_grace seconds later waits for a daemon it cannot reach
# (a cut link, a vanished host) and would wait forever: it is said, and killed.
# A launch that has started no rank $launch_grace seconds on waits for a daemon
# that will never call back: it is said, and killed, too.
launcher_grace=${RESHARD_NETNS_LAUNCHER_GRACE:-10}
launch_grace=${RESHARD_NETNS_LAUNCH_GRACE:-60}
watch_launcher() {
  local launcher=$1 hosts=$2 seen=0 idle=0 waited=0
  while kill -0 "$launcher" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if ((!seen && waited >= launch_grace)); then
      echo "netns-hosts: mpirun has started no rank ${waited} s after it began (a daemon that cannot call back): killing it" >&2
      pkill -9 -P "$launcher" 2>/dev/null || true
      kill -9 "$launcher" 2>/dev/null || true
      return
    fi
    if ranks_running "$hosts"; then
      seen=1 idle=0
    elif ((seen)); then
      idle=$((idle + 1))
      if ((idle >= launcher_grace)); then
        echo "netns-hosts: every rank has ended, but mpirun is still waiting ${idle} s later (for a host it cannot reach): killing it" >&2
        pkill -9 -P "$launcher" 2>/dev/null || true
        kill -9 "$launcher" 2>/dev/null || true
        return
      fi
    fi
  done
}

command=${1:-}
shift || true
case $command in
  check) check ;;
  up) check && up "${1:?HOSTS}" && wait_until_connected "$1" ;;
  down) down ;;
  exec) ns=$(host_ns "${1:?HOST}"); shift; exec ip netns exec "$ns" "$@" ;;
  cut) cut "${1:?HOST}" ;;
  run) check && run "$@" ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
