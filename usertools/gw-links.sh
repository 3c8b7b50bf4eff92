#!/usr/bin/env bash
# Several links per host on the namespace bed (issue 44 item 2): the goodput of one rank pair
# over 1, 2 and 4 tcp links (tcp:ifaces=...) against one link, the ring allreduce on 4 hosts x 2
# links against one link, and a link cut mid-transfer (time to give it up, bytes sent again,
# wrong bytes). Prints markdown tables (the ones in docs/bench-links.md).
#   usertools/gw-links.sh [--build DIR] [--rate 200mbit] [--seconds 3] [--rounds 2]
# Needs root (network namespaces, tc); the bed is usertools/gw-cluster.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build rate=200mbit secs=3 rounds=2
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--rate R] [--seconds S] [--rounds N]" >&2; exit 2 ;;
  esac
done
perf=$build/apps/gw-perf/gw-perf coll=$build/apps/gw-coll-perf/gw-coll-perf
[ -x "$perf" ] && [ -x "$coll" ] || { echo "build $build first (ninja -C $build)" >&2; exit 1; }
cluster=usertools/gw-cluster.sh
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
# busbw MB/s of a checked 16 MiB ring allreduce on 4 hosts x 2 links.
ring() {  # spec
  local out
  out=$(GW_LOG_LEVEL=warn bash $cluster --id gr$(( $$ % 1000 )) --hosts 4 --links 2 --rate "$rate" \
    --timeout 120 -- "$coll" -t "$1" -b 16M -e 16M -n 5 -w 1 -c 1 --json 2>/dev/null) ||
    { echo fail; return; }
  grep -q '"wrong":0' <<<"$out" || { echo fail; return; }
  grep '^{' <<<"$out" | sed 's/.*"busbw_gbps":\([0-9.]*\).*/\1/' | awk '{printf "%.1f", $1 * 1000}'
}

echo "## One rank pair, 1 MiB messages, $rate per link ($(date -u +%F), $(nproc) CPUs)"
echo
echo "| links | goodput MB/s (rounds) | vs 1 link |"
echo "|---|---|---|"
declare -A got
for k in 1 2 4; do
  spec='tcp:iface={iface}'
  [ "$k" -gt 1 ] && spec='tcp:ifaces={ifaces}'
  vals=()
  for _ in $(seq "$rounds"); do vals+=("$(pair "$k" "$spec")"); done
  got[$k]=$(printf '%s\n' "${vals[@]}" | grep -v fail | sort -n | tail -1)
  ratio=$(awk -v a="${got[$k]:-0}" -v b="${got[1]:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
  echo "| $k | ${vals[*]} | $ratio |"
done
echo
echo "## Ring allreduce, 4 hosts x 2 links, 16 MiB float32, busbw MB/s"
echo
echo "| spec | busbw MB/s (rounds) |"
echo "|---|---|"
for spec in 'tcp:iface={iface}' 'tcp:ifaces={ifaces}'; do
  vals=()
  for _ in $(seq "$rounds"); do vals+=("$(ring "$spec")"); done
  echo "| \`$spec\` | ${vals[*]} |"
done
echo
echo "## A link cut mid-transfer (2 hosts x 2 links, 5 s, host 2's link 1 down at 1.5 s for 1.5 s)"
echo
bash tests/cluster/test_links_cut.sh "$cluster" "$perf" tcp 2>&1 | grep -E "^cluster-tcp-links|FAILED"
