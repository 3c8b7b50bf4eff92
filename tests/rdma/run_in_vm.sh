#!/usr/bin/env bash
# meson test 'rdma-vm': boots the soft-RoCE VM once and runs, inside it, the rdma gtest binary
# and gw-perf -t rdma (bw and lat, two ranks on rxe0, every byte checked).
# Usage: run_in_vm.sh SOURCE_ROOT TEST_RDMA GW_PERF. Exit 77 (skip) only when the VM's
# packages are missing; any other failure fails the test.
set -uo pipefail
src=$1 test_bin=$2 perf_bin=$3
inner=$(cat <<EOF2
set -e
echo "== ibv_devices"; ibv_devices
echo "== test_rdma"; GW_LOG_LEVEL=warn $test_bin --gtest_brief=1
echo "== gw-perf -t rdma bw"
$perf_bin -t rdma:dev=rxe0 --ranks 2 -s 65536 -n 200 --check
echo "== gw-perf -t rdma lat"
$perf_bin -t rdma:dev=rxe0 --ranks 2 --test lat -s 2 -n 200 --check
echo "== rdma-vm: all passed"
EOF2
)
exec bash "$src/usertools/gw-rxe-vm.sh" --timeout 540 -- bash -c "$inner"
