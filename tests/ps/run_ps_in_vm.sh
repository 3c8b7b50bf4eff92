#!/usr/bin/env bash
# The ps part of meson test 'rdma-vm' (run alone, it boots the soft-RoCE VM itself:
# usertools/gw-rxe-vm.sh): the ps suite over rdma:dev=rxe0, ranks as threads of one process.
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
# tests/run_vm_suites.sh (meson's rdma-vm) collects the parts and boots the VM once for all.
if [ -n "${GW_VM_PART:-}" ]; then printf '%s\n' "$inner" >"$GW_VM_PART"; exit 0; fi
exec bash "$src/usertools/gw-rxe-vm.sh" --timeout 300 -- bash -c "$inner"
