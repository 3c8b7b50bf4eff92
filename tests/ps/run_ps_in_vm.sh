#!/usr/bin/env bash
# meson test 'ps-rdma-vm': boots the soft-RoCE VM (usertools/gw-rxe-vm.sh) and runs the ps
# suite inside it over rdma:dev=rxe0, ranks as threads of one process.
# Usage: run_ps_in_vm.sh SOURCE_ROOT TEST_PS [GTEST_FILTER]. Exit 77 (skip) only when the VM's
# packages are missing; any other failure fails the test.
set -uo pipefail
src=$1 test_bin=$2 filter=${3:-*}
inner=$(cat <<EOF2
set -e
echo "== ibv_devices"; ibv_devices
echo "== test_ps over rdma:dev=rxe0 (filter $filter)"
GW_LOG_LEVEL=warn GW_TEST_PS_TRANSPORT=rdma:dev=rxe0 $test_bin --gtest_brief=1 \
  --gtest_filter='$filter'
echo "== ps-rdma-vm: all passed"
EOF2
)
exec bash "$src/usertools/gw-rxe-vm.sh" --timeout 300 -- bash -c "$inner"
