#!/usr/bin/env bash
# meson test 'rdma-vm' (suites rdma, ps, nccl, coll): boots the soft-RoCE VM once
# (usertools/gw-rxe-vm.sh) and runs, in it, the parts each suite's script writes out:
# rdma/run_in_vm.sh (test_rdma, conformance's rdma rows, gw-perf), ps/run_ps_in_vm.sh,
# nccl/run_nccl_in_vm.sh and coll/run_coll_in_vm.sh. Each script still boots a VM of its own
# when run alone. A part that fails does not stop the others; the test fails naming it.
# Usage: run_vm_suites.sh SOURCE_ROOT BUILD_ROOT TEST_RDMA GW_PERF TEST_CONFORMANCE TEST_PS
#        NCCL_HARNESS NCCL_PLUGIN   ("-" for a part this build lacks). Exit 77 (skip) only
# when the VM's packages are missing.
set -uo pipefail
src=$1 build=$2 test_rdma=$3 perf=$4 conf=$5 test_ps=$6 harness=$7 plugin=$8
dir=$(mktemp -d "$build/vm-parts.XXXXXX")  # on the host's root: the guest reads it over 9p
trap 'rm -rf "$dir"' EXIT
parts=()
part() {  # name script args...
  local name=$1 script=$2
  shift 2
  GW_VM_PART=$dir/$name.sh bash "$src/tests/$script" "$@" || {
    echo "rdma-vm: could not prepare part $name"; exit 1; }
  parts+=("$name")
}
[ "$test_rdma" != - ] && part rdma rdma/run_in_vm.sh "$src" "$test_rdma" "$perf" "$conf"
[ "$test_ps" != - ] && part ps ps/run_ps_in_vm.sh "$src" "$test_ps"
[ "$harness" != - ] && part nccl nccl/run_nccl_in_vm.sh "$src" "$harness" "$plugin"
part coll coll/run_coll_in_vm.sh "$src" "$build"
cat >"$dir/all.sh" <<EOF2
failed=""
for p in ${parts[*]}; do
  echo "=== rdma-vm part \$p"
  t0=\$(date +%s)
  if bash "$dir/\$p.sh"; then r=ok; else r=FAILED; failed="\$failed \$p"; fi
  echo "=== rdma-vm part \$p: \$r (\$((\$(date +%s) - t0)) s)"
done
[ -z "\$failed" ] || { echo "rdma-vm: failed parts:\$failed"; exit 1; }
echo "rdma-vm: every part passed (${parts[*]})"
EOF2
# The parts' own limits (540 + 300 + 400 + 420 s) are upper bounds; together they take ~4 min.
bash "$src/usertools/gw-rxe-vm.sh" --timeout 1200 -- bash "$dir/all.sh"
