#!/usr/bin/env bash
# Several links per host on the namespace bed (issue 44 item 2): the goodput of one rank pair
# over 1, 2 and 4 links (tcp:ifaces=... or dpdk af_packet ports, dpdk.ifaces=...) against one
# link, the ring allreduce on 4 hosts x 2 links against one link, and a link cut mid-transfer
# (time to take it out, data sent again, wrong bytes). Prints markdown tables (the ones in
# docs/bench-cluster.md).
#   usertools/gw-links.sh [--build DIR] [--transport tcp|dpdk] [--rate 200mbit] [--seconds 3]
#                         [--rounds 2] [--parts pair,ring,cut]
# The ring rows add the share of both CPUs busy over the run (/proc/stat): the bed's kernel
# forwarding (veth, bridge, tbf: softirq) is what a 4-host ring runs out of first.
# Needs root (network namespaces, tc); the bed is usertools/gw-cluster.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build rate=200mbit secs=3 rounds=2 kind=tcp parts=pair,ring,cut
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --transport) kind=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--transport tcp|dpdk] [--rate R] [--seconds S] [--rounds N] [--parts pair,ring,cut]" >&2
       exit 2 ;;
  esac
done
perf=$build/apps/gw-perf/gw-perf coll=$build/apps/gw-coll-perf/gw-coll-perf
[ -x "$perf" ] && [ -x "$coll" ] || { echo "build $build first (ninja -C $build)" >&2; exit 1; }
cluster=usertools/gw-cluster.sh
case $kind in  # the spec of one link and of every link ({iface}, {ifaces}: gw-cluster.sh)
  tcp) one='tcp:iface={iface}' all='tcp:ifaces={ifaces}' ;;
  dpdk) one='dpdk:vdev=net_af_packet0;qdisc_bypass=0,ifaces={iface}'
        all='dpdk:vdev=net_af_packet0;qdisc_bypass=0,ifaces={ifaces}' ;;
  *) echo "--transport tcp or dpdk" >&2; exit 2 ;;
esac
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# MB/s of one gw-perf run (client's figure), or "fail".
pair() {  # links spec
  rm -f "$logs"/rank*.log
  GW_LOG_LEVEL=warn bash $cluster --id gl$(( $$ % 1000 )) --hosts 2 --links "$1" --rate "$rate" --timeout 60 \
    --logs "$logs" -- "$perf" -t "$2" -s 1M -D "$secs" --check --json >/dev/null 2>&1 ||
    { echo fail; return; }
  grep -h '^{' "$logs/rank1.log" | grep -q '"check_errors":0' || { echo fail; return; }
  grep -h '^{' "$logs/rank1.log" | sed 's/.*"bw_avg_MBps":\([0-9.]*\).*/\1/'
}
busy() { awk '/^cpu /{print $2+$3+$4+$6+$7+$8+$9, $5}' /proc/stat; }  # busy, idle jiffies
# busbw MB/s of a checked 16 MiB ring allreduce on 4 hosts x 2 links, and "(N % CPU)".
ring() {  # spec
  local out a b
  a=($(busy))
  out=$(GW_LOG_LEVEL=warn bash $cluster --id gr$(( $$ % 1000 )) --hosts 4 --links 2 --rate "$rate" \
    --timeout 120 -- "$coll" -t "$1" -b 16M -e 16M -n 5 -w 1 -c 1 --json 2>/dev/null) ||
    { echo fail; return; }
  b=($(busy))
  grep -q '"wrong":0' <<<"$out" || { echo fail; return; }
  grep '^{' <<<"$out" | sed 's/.*"busbw_gbps":\([0-9.]*\).*/\1/' |
    awk -v b=$((b[0] - a[0])) -v i=$((b[1] - a[1])) '{printf "%.1f (%.0f %% CPU)", $1 * 1000, 100 * b / (b + i)}'
}

has() { [[ ",$parts," == *",$1,"* ]]; }
for part in ${parts//,/ }; do
  case $part in pair|ring|cut) ;; *) echo "--parts: pair, ring or cut, not '$part'" >&2; exit 2 ;; esac
done
if has pair; then
  echo "## $kind: one rank pair, 1 MiB messages, $rate per link ($(date -u +%F), $(nproc) CPUs)"
  echo
  echo "| links | goodput MB/s (rounds) | vs 1 link |"
  echo "|---|---|---|"
  declare -A got
  for k in 1 2 4; do
    spec=$one
    [ "$k" -gt 1 ] && spec=$all
    vals=()
    for _ in $(seq "$rounds"); do vals+=("$(pair "$k" "$spec")"); done
    got[$k]=$(printf '%s\n' "${vals[@]}" | grep -v fail | sort -n | tail -1)
    ratio=$(awk -v a="${got[$k]:-0}" -v b="${got[1]:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    echo "| $k | ${vals[*]} | $ratio |"
  done
  echo
fi
if has ring; then
  echo "## Ring allreduce, 4 hosts x 2 links, $rate per link, 16 MiB float32, busbw MB/s"
  echo
  echo "| spec | busbw MB/s (rounds) |"
  echo "|---|---|"
  for spec in "$one" "$all"; do
    vals=()
    for _ in $(seq "$rounds"); do vals+=("$(ring "$spec")"); done
    echo "| \`$spec\` | ${vals[*]} |"
  done
  echo
fi
if has cut; then
  echo "## A link cut mid-transfer (2 hosts x 2 links, 5 s, host 2's link 1 down at 1.5 s for 1.5 s)"
  echo
  bash tests/cluster/test_links_cut.sh "$cluster" "$perf" "$kind" 2>&1 | grep -E "^cluster-$kind-links|FAILED"
fi
