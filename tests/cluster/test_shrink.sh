#!/usr/bin/env bash
# meson test 'cluster-dpdk-shrink' (issue 42): Communicator::shrink after a SIGKILL over dpdk
# af_packet on veth, in processes on the namespace bed: 4 ranks run allreduces (every element
# checked), rank 3 is killed mid-run, the three others shrink and finish with every element
# right (tests/coll/shrink_kill.py, case kill); the bed is left clean.
# Usage: test_shrink.sh GW_CLUSTER_SH BUILD_ROOT
set -uo pipefail
script=$1 build=$2
src=$(cd "$(dirname "$script")/.." && pwd)
fail() { echo "cluster-dpdk-shrink FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces and tc (CI runs as root)"
ip netns list >/dev/null 2>&1 || fail "'ip netns' does not work on this machine"
id=s$(( $$ % 100000 ))
trap 'bash "$script" --id "$id" down >/dev/null 2>&1' EXIT
bash "$script" --id "$id" --hosts 4 up >/dev/null || fail "the test bed did not come up"
GW_SHRINK_NETNS=$id GW_SHRINK_RANKS=4 \
  GW_SHRINK_TRANSPORT="dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface}" \
  /usr/bin/python3 "$src/tests/coll/shrink_kill.py" "$build" kill || fail "see above"
bash "$script" --id "$id" down
bash "$script" --id "$id" check-clean || fail "the test bed left namespaces or links"
echo "cluster-dpdk-shrink: ok"
