#!/usr/bin/env bash
# The nccl part of meson test 'rdma-vm' (run alone, it boots the soft-RoCE VM itself:
# usertools/gw-rxe-vm.sh): the NCCL plugin harness over rdma:dev=rxe0: both ABI versions, 2
# and 3 ranks, size mismatch, a peer killed mid-transfer, bad registrations.
# Usage: run_nccl_in_vm.sh SOURCE_ROOT HARNESS PLUGIN. Exit 77 (skip) only when the VM's
# packages are missing; any other failure fails the test.
set -uo pipefail
src=$1 harness=$2 plugin=$3
inner=$(cat <<EOF2
set -e
echo "== ibv_devices"; ibv_devices
for c in "12 basic 2" "8 basic 3" "12 mismatch 2" "8 death 2" "12 badreg 2"; do
  echo "== gw-nccl-harness PLUGIN \$c rdma:dev=rxe0"
  GW_LOG_LEVEL=warn timeout 120 $harness $plugin \$c rdma:dev=rxe0
done
echo "== nccl-rdma-vm: all passed"
EOF2
)
# tests/run_vm_suites.sh (meson's rdma-vm) collects the parts and boots the VM once for all.
if [ -n "${GW_VM_PART:-}" ]; then printf '%s\n' "$inner" >"$GW_VM_PART"; exit 0; fi
exec bash "$src/usertools/gw-rxe-vm.sh" --timeout 400 -- bash -c "$inner"
