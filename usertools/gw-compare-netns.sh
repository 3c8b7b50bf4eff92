#!/usr/bin/env bash
# gw-compare's root part: two network namespaces joined by a veth pair, for DPDK af_packet.
# Addresses exist only inside the namespaces (10.252.0.1/30, 10.252.0.2/30).
#   usertools/gw-compare-netns.sh up ID     # namespaces gwcIDa/gwcIDb, ifaces gwcIDa0/gwcIDb1
#   usertools/gw-compare-netns.sh down ID   # idempotent; gw-compare always calls it
set -uo pipefail
cmd=${1:-}; id=${2:-}
[ -n "$cmd" ] && [ -n "$id" ] || { echo "usage: $0 up|down ID" >&2; exit 2; }
a=gwc${id}a; b=gwc${id}b
down() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; return 0; }
case "$cmd" in
  up)
    [ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
    down
    set -e
    trap 'down' ERR
    ip netns add "$a"
    ip netns add "$b"
    ip link add "${a}0" type veth peer name "${b}1"
    ip link set "${a}0" netns "$a"
    ip link set "${b}1" netns "$b"
    ip -n "$a" link set lo up
    ip -n "$b" link set lo up
    ip -n "$a" link set "${a}0" up
    ip -n "$b" link set "${b}1" up
    ip -n "$a" addr add 10.252.0.1/30 dev "${a}0"
    ip -n "$b" addr add 10.252.0.2/30 dev "${b}1"
    ;;
  down) down ;;
  *) echo "usage: $0 up|down ID" >&2; exit 2 ;;
esac
