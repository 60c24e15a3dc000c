#!/bin/sh
# hosts.sh — one Linux machine as K hosts on a TCP network (network namespaces on a bridge) running one Open MPI
# job, to measure ringo's cross-host mpi links. Needs root, iproute2 (ip, tc), unshare, mpirun. Run: bench/hosts.sh
# up 2; bench/hosts.sh run 2 1 -- build/bin/ringo-bench --compare mpi -b 4K -e 64M -f 8; bench/hosts.sh down.
set -eu

NET=${RINGO_HOSTS_NET:-10.77.0}   # the /24 the hosts live on: host i is $NET.(i+1), the root side .254
BR=ringo-br0                       # the bridge in the root namespace, the "switch" of the network
NS=ringo-h                         # namespace (and host) names: ringo-h0, ringo-h1, ...
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

usage() {
  cat <<EOF
usage: $0 up K [--rate MBIT] [--delay MS] [--mtu BYTES]
       $0 run K PER -- command [args...]
       $0 status | down

  up K       makes K network namespaces ${NS}0..${NS}K-1, each with loopback and one interface eth0
             at $NET.(i+1)/24 joined to the bridge $BR in the root namespace ($NET.254), so that
             processes in different namespaces talk TCP through the kernel's network stack.
             --rate MBIT  caps what each host sends at MBIT Mbit/s (tc tbf on its eth0), like a NIC
                          of that speed: 10000 = 10 Gbit/s. Without it veth moves data at memory speed.
             --delay MS   adds MS milliseconds (fractions allowed: 0.05) to every packet a host sends
                          (tc netem on its eth0), so a round trip between two hosts gains 2*MS.
                          Needs a kernel with sch_netem (CONFIG_NET_SCH_NETEM).
             --mtu BYTES  MTU of the links (default 1500; 9000 mimics jumbo frames).
             Running up again rebuilds everything with the new K and options.
  run K PER  runs the command under mpirun with PER ranks in each of the first K namespaces (K*PER
             ranks, ranks 0..PER-1 in ${NS}0, ...). Each host's ranks run under their own orted in
             that namespace, with hostname and RINGO_HOSTNAME set to the namespace's name and a private
             /dev/shm, as on a real host. Open MPI talks TCP between hosts and shared memory (vader)
             only within one. Ranks are not bound to cores (the hosts share them), and when K*PER
             exceeds the cores MPI yields while it waits, as mpirun does on an oversubscribed node.
             Extra mpirun options: MPIRUN_ARGS="--mca btl_base_verbose 100".
             Environment variables (RINGO_DEBUG, ...) reach every rank.
  status     shows the namespaces, their addresses and queueing disciplines.
  down       kills what still runs in the namespaces and removes them and the bridge. Idempotent.
EOF
}

die() { echo "hosts.sh: $*" >&2; exit 1; }

# Everything below changes the network configuration, which only root may do; ip netns may also be
# forbidden inside a container without CAP_SYS_ADMIN, and saying so beats a cryptic ip error later.
need_root() {
  [ "$(id -u)" = 0 ] || die "must run as root (network namespaces and bridges need CAP_NET_ADMIN)"
  command -v ip >/dev/null || die "needs ip from iproute2 (apt-get install iproute2)"
  ip netns list >/dev/null 2>&1 || die "'ip netns' is not allowed here (no CAP_SYS_ADMIN or no netns support)"
}

count_of() {
  case $1 in '' | *[!0-9]*) die "$2 must be a positive number, got '$1'" ;; esac
  if [ "$1" -lt 1 ] || [ "$1" -gt 253 ]; then die "$2 must be 1..253, got $1"; fi
}

# The namespaces this script made, found by name so that down works whatever K up was given.
our_namespaces() { ip netns list | awk -v p="$NS" 'index($1, p) == 1 && substr($1, length(p) + 1) ~ /^[0-9]+$/ { print $1 }' | sort -V; }

down() {
  need_root
  for ns in $(our_namespaces); do
    # A namespace whose processes live on stays alive after ip netns del (only its name goes), so the
    # orteds and ranks of an interrupted run are ended first, each by its own pid.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    sleep 0.2
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" || die "could not remove namespace $ns"
  done
  # Deleting a namespace destroys its veth end and so the root end too; the bridge goes by hand.
  if ip link show "$BR" >/dev/null 2>&1; then ip link del "$BR"; fi
  echo "hosts.sh: down (no ${NS}* namespaces, no $BR)"
}

# tc on a host's eth0: tbf caps the rate, netem (below it, when both are asked) adds the delay.
shape() {
  ns=$1 rate=$2 delay=$3
  [ -n "$rate$delay" ] || return 0
  parent=root
  if [ -n "$rate" ]; then
    # A burst of 1 ms at the line rate (at least 64 KiB, one GSO packet) keeps the average at the rate
    # without letting a whole message through at memory speed.
    burst=$(awk -v r="$rate" 'BEGIN { b = r * 1e6 / 8 / 1000; if (b < 65536) b = 65536; printf "%d", b }')
    ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: tbf rate "${rate}mbit" burst "$burst" latency 50ms
    parent="parent 1:1"
  fi
  if [ -n "$delay" ]; then
    # shellcheck disable=SC2086  # $parent is two words on purpose
    ip netns exec "$ns" tc qdisc add dev eth0 $parent handle 10: netem delay "${delay}ms" limit 100000 2>/dev/null ||
      die "tc netem failed: this kernel has no sch_netem (CONFIG_NET_SCH_NETEM); leave out --delay"
  fi
}

up() {
  need_root
  [ $# -ge 1 ] || { usage >&2; exit 2; }
  k=$1; shift; count_of "$k" K
  rate='' delay='' mtu=1500
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) [ $# -ge 2 ] || die "--rate needs MBIT"; rate=$2; shift 2 ;;
      --delay) [ $# -ge 2 ] || die "--delay needs MS"; delay=$2; shift 2 ;;
      --mtu) [ $# -ge 2 ] || die "--mtu needs BYTES"; mtu=$2; shift 2 ;;
      *) die "up: unknown option '$1' (try: $0 -h)" ;;
    esac
  done
  if [ -n "$(our_namespaces)" ] || ip link show "$BR" >/dev/null 2>&1; then down >/dev/null; fi
  # A step that fails halfway (no netem, a name taken) must not leave half a network behind.
  trap 'down >/dev/null 2>&1' EXIT
  ip link add "$BR" type bridge 2>/dev/null ||
    die "cannot create the bridge $BR: 'ip link add' is not allowed here (needs CAP_NET_ADMIN)"
  ip link set "$BR" mtu "$mtu"
  ip addr add "$NET.254/24" dev "$BR"
  ip link set "$BR" up
  i=0
  while [ "$i" -lt "$k" ]; do
    ns=$NS$i
    ip netns add "$ns" 2>/dev/null ||
      die "cannot create network namespace $ns: 'ip netns add' is not allowed here (needs CAP_SYS_ADMIN)"
    ip link add "ringo-v$i" mtu "$mtu" type veth peer name eth0 mtu "$mtu" netns "$ns"
    ip link set "ringo-v$i" master "$BR" up
    ip netns exec "$ns" ip link set lo up
    # IPv4 only, as the usage says: Open MPI's TCP BTL would otherwise also offer eth0's IPv6
    # link-local address to its peers.
    ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null || true
    ip netns exec "$ns" ip addr add "$NET.$((i + 1))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    shape "$ns" "$rate" "$delay"
    i=$((i + 1))
  done
  trap - EXIT
  echo "hosts.sh: up: $k hosts ${NS}0..$NS$((k - 1)) at $NET.1..$NET.$k, bridge $BR ($NET.254)," \
    "mtu $mtu${rate:+, rate ${rate} Mbit/s}${delay:+, delay ${delay} ms per direction}"
}

status() {
  for ns in $(our_namespaces); do
    printf '%s: %s  qdisc: %s\n' "$ns" \
      "$(ip netns exec "$ns" ip -4 -o addr show dev eth0 | awk '{ print $4 }')" \
      "$(ip netns exec "$ns" tc qdisc show dev eth0 | awk '{ printf "%s%s", s, $0; s = " | " }')"
  done
  if ip link show "$BR" >/dev/null 2>&1; then
    ip -4 -o addr show dev "$BR" | awk '{ print "bridge " $2 ": " $4 }'
  else
    echo "no bridge $BR (run: $0 up K)"
  fi
}

# mpirun calls this like ssh: agent [ssh options] HOST COMMAND... The host is a namespace's address;
# the command (the orted line, one shell string split in words as ssh would pass it) runs in that
# namespace, in its own UTS namespace named after it (Open MPI names its session directory and vader's
# shared-memory files after the hostname, so two "hosts" with one name would collide) and on a private
# /dev/shm (a rank can only reach shared memory of its own host, which checks that nothing crosses).
agent() {
  while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
  [ $# -ge 2 ] || die "agent: usage: agent HOST COMMAND..."
  host=$1; shift
  last=${host##*.}
  [ "${host%.*}" = "$NET" ] || die "agent: $host is not a host of $NET.0/24"
  count_of "$last" "the last byte of $host"
  ns=$NS$((last - 1))
  ip netns pids "$ns" >/dev/null 2>&1 || die "agent: no namespace $ns for $host (run: $0 up K)"
  export RINGO_HOSTNAME="$ns"
  # shellcheck disable=SC2016  # $1 and $2 are the inner shell's
  exec ip netns exec "$ns" unshare --uts --mount sh -c \
    'hostname "$1" && mount -t tmpfs -o mode=1777 ringo-shm /dev/shm && eval "$2"' agent "$ns" "$*"
}

run() {
  need_root
  if [ $# -lt 4 ] || [ "$3" != -- ]; then usage >&2; exit 2; fi
  k=$1 per=$2; shift 3
  count_of "$k" K; count_of "$per" PER
  [ -n "$(our_namespaces)" ] || die "no hosts: run '$0 up K' first"
  i=0 hosts=''
  while [ "$i" -lt "$k" ]; do
    ip netns pids "$NS$i" >/dev/null 2>&1 || die "no namespace $NS$i: run '$0 up $k' first"
    hosts="$hosts${hosts:+,}$NET.$((i + 1)):$per"
    i=$((i + 1))
  done
  # pml ob1 keeps UCX out (it would choose its own transports); btl tcp,vader,self then puts vader
  # between ranks of one orted and TCP on the bridge's subnet between hosts. No tree spawn: mpirun
  # starts every orted itself through the agent. mpirun stays in the root namespace, reached at .254.
  # --bind-to none: each orted sees all of this machine's cores as its own host's and would bind its
  # local rank 0 to core 0, so the hosts' ranks would pile onto the same cores, and MPI's busy-polling
  # ranks would then take turns a scheduler tick (4 ms) at a time.
  # The hosts share this machine's cores, so no orted can see that they are oversubscribed; when the
  # ranks outnumber the cores, ask for what mpirun does on an oversubscribed node: MPI's waits yield
  # the core instead of spinning a whole time slice while the rank they wait for cannot run.
  yield=0
  if [ $((k * per)) -gt "$(nproc)" ]; then yield=1; fi
  # shellcheck disable=SC2086  # MPIRUN_ARGS is a list of words on purpose
  exec mpirun --allow-run-as-root --oversubscribe -np $((k * per)) -H "$hosts" --map-by slot --bind-to none \
    --mca plm_rsh_agent "/bin/sh $SELF agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$NET.0/24" --mca pml ob1 --mca btl tcp,vader,self \
    --mca btl_tcp_if_include "$NET.0/24" --mca mpi_yield_when_idle "$yield" ${MPIRUN_ARGS:-} "$@"
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1; shift
case $cmd in
  up) up "$@" ;;
  run) run "$@" ;;
  down) down ;;
  status) status ;;
  agent) agent "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
