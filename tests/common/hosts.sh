#!/usr/bin/env bash
# Hosts as network namespaces: each one a "machine" with its own address, all on one
# Linux bridge (the switch) in the root namespace, which reaches every host through the
# bridge's own address. Used by the multi-host tests and by bench/. Needs root.
#
#   hosts.sh up NAME N [PREFIX]   make hosts 1..N of NAME; PREFIX is the /24's first three
#                                 octets (10.246.7); by default the first 10.246.K.0/24
#                                 that no interface or route here uses. Prints the prefix.
#   hosts.sh down NAME            remove everything NAME made, processes in its hosts too
#                                 (idempotent: safe to re-run, also after a crash)
#   hosts.sh addr NAME I          host I's address (0: the bridge's, the root namespace's)
#   hosts.sh cut NAME I           host I's link down (its processes stay alive)
#   hosts.sh restore NAME I       host I's link up again
#   hosts.sh exec NAME I CMD...   run CMD in host I (only its network namespace: the
#                                 filesystem, /sys and cgroups stay the machine's, so
#                                 podman works there); exec'd, so its pid is CMD's
#   hosts.sh dns NAME I SERVER    host I's later execs resolve names with the DNS server
#                                 at address SERVER: CMD runs in a mount namespace of its
#                                 own where a resolv.conf naming SERVER covers /etc/resolv.conf
#
# NAME is 1-8 of [a-z0-9] (interface names are at most 15 bytes). Everything made is
# named after it: namespaces mh-NAME-I, the bridge mhbr-NAME, root-side veths mhv-NAME-I,
# and the state file /run/sandbox-hosts/NAME (its prefix; NAME.resolv-I: host I's
# resolv.conf); so runs with other names never
# collide, and `down` finds what `up` made even when `up` died halfway.
set -euo pipefail

STATE=/run/sandbox-hosts
die() { echo "hosts.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

check_name() {
  [[ "$1" =~ ^[a-z0-9]{1,8}$ ]] || die "NAME must be 1-8 of [a-z0-9], not '$1'"
}
check_index() {  # NAME I
  [[ "$2" =~ ^[0-9]+$ ]] || die "host index must be a number, not '$2'"
  [[ -e "/run/netns/mh-$1-$2" ]] || die "no host $2 of $1 (hosts.sh up $1 N first)"
}
prefix_of() {
  [[ -f "$STATE/$1" ]] || die "no hosts named $1 (hosts.sh up $1 N first)"
  cat "$STATE/$1"
}

# The first 10.246.K.0/24 that no address or route of this machine overlaps.
free_prefix() {
  local used k
  used=$( (ip -4 -o addr show; ip -4 route show table all) 2>/dev/null)
  for k in $(seq 0 255); do
    grep -qE "(^|[^0-9])10\.246\.$k\.[0-9]+" <<<"$used" && continue
    grep -qx "10.246.$k" "$STATE"/* 2>/dev/null && continue
    echo "10.246.$k"
    return
  done
  die "no free 10.246.K.0/24 here"
}

up() {  # NAME N [PREFIX]
  local name=$1 n=$2 prefix=${3:-} i ns veth
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 99)) || die "N must be 1..99, not '$n'"
  [[ -e "$STATE/$name" ]] && die "hosts $name exist already (hosts.sh down $name)"
  mkdir -p "$STATE"
  {
    flock 9  # parallel ups pick different prefixes
    if [[ -z "$prefix" ]]; then prefix=$(free_prefix); fi
    [[ "$prefix" =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "PREFIX is three octets (10.246.7), not '$prefix'"
    if ip -4 -o addr show | grep -qF " $prefix."; then die "$prefix.0/24 is in use here (ip -4 addr)"; fi
    echo "$prefix" > "$STATE/$name"
  } 9>"$STATE/.lock"
  trap 'down "$name" >/dev/null 2>&1' ERR
  ip link add "mhbr-$name" type bridge
  ip addr add "$prefix.1/24" dev "mhbr-$name"
  ip link set "mhbr-$name" up
  for ((i = 1; i <= n; i++)); do
    ns="mh-$name-$i"
    veth="mhv-$name-$i"
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "mhbr-$name" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$prefix.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$prefix.1"
  done
  trap - ERR
  echo "$prefix"
}

down() {  # NAME
  local name=$1 ns pids
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^mh-$name-[0-9]+$" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null || true
    ip netns delete "$ns" 2>/dev/null || true
  done
  # A veth goes with its peer's namespace; one left by an up that died before moving it:
  for veth in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^mhv-$name-[0-9]+$" || true); do
    ip link delete "$veth" 2>/dev/null || true
  done
  ip link delete "mhbr-$name" type bridge 2>/dev/null || true
  rm -f "$STATE/$name" "$STATE/$name".resolv-*
}

[[ $# -ge 2 ]] || usage
command=$1
name=$2
check_name "$name"
[[ $(id -u) -eq 0 ]] || die "needs root (ip netns, bridges)"
case "$command" in
  up) [[ $# -ge 3 && $# -le 4 ]] || usage; up "$name" "$3" "${4:-}" ;;
  down) [[ $# -eq 2 ]] || usage; down "$name" ;;
  addr)
    [[ $# -eq 3 && "$3" =~ ^[0-9]+$ ]] || usage
    [[ "$3" == 0 ]] || check_index "$name" "$3"
    echo "$(prefix_of "$name").$(($3 + 1))" ;;
  cut)
    [[ $# -eq 3 ]] || usage
    check_index "$name" "$3"
    ip link set "mhv-$name-$3" down ;;
  restore)
    [[ $# -eq 3 ]] || usage
    check_index "$name" "$3"
    ip link set "mhv-$name-$3" up
    # The kernel tells a carrier change to the link's users up to a second later: until
    # both ends say up, packets still drop.
    for _ in $(seq 50); do
      [[ $(cat "/sys/class/net/mhv-$name-$3/operstate") == up ]] &&
        ip -n "mh-$name-$3" -o link show eth0 | grep -q 'state UP' && exit 0
      sleep 0.1
    done
    die "host $3's link is not up 5 s after restore" ;;
  dns)
    [[ $# -eq 4 ]] || usage
    check_index "$name" "$3"
    [[ "$4" =~ ^[0-9a-fA-F.:]+$ ]] || die "SERVER is an address, not '$4'"
    echo "nameserver $4" > "$STATE/$name.resolv-$3" ;;
  exec)
    [[ $# -ge 4 ]] || usage
    check_index "$name" "$3"
    ns=/run/netns/mh-$name-$3
    resolv=$STATE/$name.resolv-$3
    shift 3
    [[ -f "$resolv" ]] || exec nsenter --net="$ns" -- "$@"
    # As `ip netns exec` does with /etc/netns/NS/resolv.conf, without remounting /sys.
    exec unshare --mount --propagation private -- bash -c \
      'mount --bind "$1" /etc/resolv.conf && exec nsenter --net="$2" -- "${@:3}"' _ "$resolv" "$ns" "$@" ;;
  *) usage ;;
esac
