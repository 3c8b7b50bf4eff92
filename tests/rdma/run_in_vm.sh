#!/usr/bin/env bash
# The rdma part of meson test 'rdma-vm' (run alone, it boots the soft-RoCE VM itself): the
# rdma gtest binary, the transport conformance suite's rdma rows (rxe0 with 1 and 2 queue
# pairs per connection) and gw-perf -t rdma (bw and lat, two ranks on rxe0, every byte
# checked, perftest options).
# Usage: run_in_vm.sh SOURCE_ROOT TEST_RDMA GW_PERF [TEST_CONFORMANCE]. Exit 77 (skip) only
# when the VM's packages are missing; any other failure fails the test.
set -uo pipefail
src=$1 test_bin=$2 perf_bin=$3 conf_bin=${4:-}
conf=""
if [ -n "$conf_bin" ]; then
  # 2..4 ranks: larger groups of busy threads on 2 emulated vCPUs only measure the emulator.
  conf="echo '== test_conformance (rdma rows)'
GW_CONFORMANCE_DRIVER=rdma GW_LOG_LEVEL=warn $conf_bin --gtest_brief=1 \
  --gtest_filter='-*_5ranks:*_6ranks:*_7ranks:*_8ranks'"
fi
inner=$(cat <<EOF2
set -eo pipefail
echo "== ibv_devices"; ibv_devices
echo "== test_rdma"; GW_LOG_LEVEL=warn $test_bin --gtest_brief=1
$conf
echo "== gw-perf -t rdma bw"
$perf_bin -t rdma:dev=rxe0 --ranks 2 -s 65536 -n 200 --check
echo "== gw-perf -t rdma bw -r 256: most messages written straight into advertised receives"
$perf_bin -t rdma:dev=rxe0 --ranks 2 -s 65536 -n 200 -r 256 --stats 2>&1 | tee /tmp/gw-stats.log
w=\$(awk '/^server: advert_writes_received /{print \$3}' /tmp/gw-stats.log)
[ "\${w:-0}" -ge 100 ] || { echo "FAIL: only \${w:-0} of 200+ messages used an advertisement"; exit 1; }
echo "== gw-perf -d rxe0 -x 1 -q 2 bw (perftest options)"
$perf_bin -d rxe0 -x 1 -q 2 --ranks 2 -s 1M -n 50 --check
echo "== gw-perf -t rdma lat"
$perf_bin -t rdma:dev=rxe0 --ranks 2 --test lat -s 2 -n 200 --check
echo "== rdma-vm: all passed"
EOF2
)
# tests/run_vm_suites.sh (meson's rdma-vm) collects the parts and boots the VM once for all.
if [ -n "${GW_VM_PART:-}" ]; then printf '%s\n' "$inner" >"$GW_VM_PART"; exit 0; fi
exec bash "$src/usertools/gw-rxe-vm.sh" --timeout 540 -- bash -c "$inner"
