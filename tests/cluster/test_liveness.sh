#!/usr/bin/env bash
# The liveness checks of issue 39 over dpdk af_packet on veth, in the namespace test bed:
#  1. gap: 2 ranks (gw-soak, every element checked), one makes no gradwire call for 10 s
#     before one of its collectives while the other waits in it, and the PS worker 10 s before
#     a round while the server waits: every op must succeed;
#  2. stop/kill: 4 ranks (usertools/gw-fail-trials.py --netns), one SIGKILLed, one SIGSTOPped
#     with coll.timeout_ms = 60 s: every survivor names it within 2 s (heartbeats).
#   test_liveness.sh GW_CLUSTER_SH BUILD_ROOT
set -uo pipefail
script=$1 build=$2
src=$(cd "$(dirname "$script")/.." && pwd)
fail() { echo "cluster-dpdk-liveness FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces and tc (CI runs as root)"
ip netns list >/dev/null 2>&1 || fail "'ip netns' does not work on this machine"
spec="dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface}"
id=l$(( $$ % 100000 ))
logs=$(mktemp -d /tmp/gw-liveness.XXXXXX)
trap 'rm -rf "$logs"; bash "$script" --id "$id" down >/dev/null 2>&1' EXIT

echo "== gap: 2 ranks over af_packet, one computes 10 s in the collectives, the PS worker 10 s"
bash "$script" --id "$id" --hosts 2 --timeout 90 --logs "$logs" -- "$build/apps/gw-soak/gw-soak" \
  -t "$spec" --ops 10 --max-count 50000 --servers 1 --ps-rounds 3 --gaps 1 --gap-min-ms 10000 \
  --gap-max-ms 10000 --seed 5 --timeout-ms 60000 || fail "a rank failed (logs above)"
grep -h "computes" "$logs"/rank*.log
grep -q "computes 10000 ms before op" "$logs"/rank*.log || fail "no rank took its collective gap"
grep -q "computes 10000 ms before PS round" "$logs"/rank*.log || fail "the PS worker took no gap"
bash "$script" --id "$id" check-clean || fail "the test bed left namespaces or links"

echo "== stop and kill: 4 ranks over af_packet"
bash "$script" --id "$id" --hosts 4 up >/dev/null || fail "the test bed did not come up"
/usr/bin/python3 "$src/usertools/gw-fail-trials.py" --netns "$id" --transport "$spec" \
  --kills 1 --stops 1 --ranks 4-4 --timeout-ms 60000 --stop-limit-s 2 --bytes 262144 \
  --build "$build" || fail "a trial failed"
bash "$script" --id "$id" down
bash "$script" --id "$id" check-clean || fail "the test bed left namespaces or links"
echo "cluster-dpdk-liveness: ok"
