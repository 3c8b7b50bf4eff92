#!/usr/bin/env bash
# One check of the cluster suite: start the test bed, run gw-coll-perf's checked allreduce in
# every namespace, require #wrong = 0 for every size (summed over ranks: each rank compares
# every element with its own reference), every rank's exit 0, and a clean teardown.
#   test_cluster.sh GW_CLUSTER_SH GW_COLL_PERF tcp|tcp-hier|dpdk
set -uo pipefail
script=$1 perf=$2 mode=$3
fail() { echo "cluster-$mode FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces and tc (CI runs as root)"
ip netns list >/dev/null 2>&1 || fail "'ip netns' does not work on this machine"
command -v tc >/dev/null || fail "tc (iproute2) is missing"
id=c$(( $$ % 100000 ))
# 2 cores: few ranks; the dpdk ranks busy-poll, so three of them at most.
sizes=(-b 4K -e 4M -f 16 -n 2 -w 1 -c 1 --json --timeout 20000)
case "$mode" in
  tcp) shape=(--hosts 4); spec="tcp:iface={iface}"; want=3 ;;
  tcp-hier) shape=(--hosts 2 --ranks-per-host 2); spec="tcp:iface={iface}"; want=3 ;;
  dpdk) shape=(--hosts 3); spec="dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface}"; want=3 ;;
  *) fail "unknown mode" ;;
esac
out=$(bash "$script" --id "$id" "${shape[@]}" --rate 1gbit --timeout 45 -- \
      "$perf" -t "$spec" "${sizes[@]}")
rc=$?
echo "$out"
bash "$script" --id "$id" check-clean || fail "the test bed left namespaces or links"
[ "$rc" -eq 0 ] || fail "a rank failed (exit $rc)"
rows=$(grep -c '"wrong":0}' <<<"$out")
[ "$rows" -eq "$want" ] || fail "$rows of $want sizes checked without a wrong element"
if [ "$mode" = tcp-hier ]; then
  grep -q '"algo":"hier"' <<<"$out" || fail "2 hosts x 2 ranks did not choose hier"
fi
echo "cluster-$mode: ok"
