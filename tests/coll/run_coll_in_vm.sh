#!/usr/bin/env bash
# The coll part of meson test 'rdma-vm' (run alone, it boots the soft-RoCE VM itself:
# usertools/gw-rxe-vm.sh), over rdma:dev=rxe0: abort and the culprit's name (test_coll, ranks
# as threads); a rank that makes no call for 10 s (test_coll CollLiveness, test_capi gap; the
# PyTorch backend with GW_VM_TORCH=1); SIGKILL and SIGSTOP of one of 4 rank processes with
# coll.timeout_ms = 60 s, every survivor naming it within 3 s (1.5 s of silence, then the
# emulated guest under load; usertools/gw-fail-trials.py:
# the stopped one by its missing heartbeats).
# Usage: run_coll_in_vm.sh SOURCE_ROOT BUILD_ROOT. Exit 77 (skip) only when the VM's packages
# are missing; any other failure fails the test.
set -uo pipefail
src=$1 build=$2
inner=$(cat <<EOF2
set -e
export GW_LOG_LEVEL=warn
echo "== test_coll over rdma:dev=rxe0"
GW_TEST_COLL_TRANSPORT=rdma:dev=rxe0 $build/tests/coll/test_coll --gtest_brief=1 \
  --gtest_filter='CollAbort.*:CollErrors.DeadRank*:CollErrors.RankThatNever*:CollLiveness.*'
echo "== test_capi gap over rdma:dev=rxe0"
GW_TEST_CAPI_TRANSPORT=rdma:dev=rxe0 $build/tests/capi/test_capi gap
echo "== PyTorch backend: compute gap over rdma:dev=rxe0"
if [ "${GW_VM_TORCH:-0}" != 1 ]; then
  # Three imports of torch in the emulated guest take ~90 s of CI's budget; the backend's gap
  # handling is above the transport (tcp and memif rows of test_liveness run on the host).
  echo "not run: set GW_VM_TORCH=1 (about 100 s: torch imports in the TCG guest)"
elif ls $build/python/gradwire/_C*.so >/dev/null 2>&1; then
  # TMPDIR on the guest's tmpfs: pytest's capture files and the FileStore need local files.
  TMPDIR=/var/tmp PYTHONPATH=$build/python:$src/python/tests OMP_NUM_THREADS=1 GW_LOG_LEVEL=error \
    GW_TEST_TORCH_RDMA=rdma:dev=rxe0 /usr/bin/python3 -m pytest -q -p no:cacheprovider -x \
    $src/python/tests/test_liveness.py -k rdma
else
  echo "not run: this build has no PyTorch backend (python3-torch missing at configure)"
fi
echo "== kill and stop trials, 4 ranks over rdma:dev=rxe0"
GW_LOG_LEVEL=error /usr/bin/python3 $src/usertools/gw-fail-trials.py --kills 1 --stops 1 \
  --ranks 4-4 --timeout-ms 60000 --stop-limit-s 3 --bytes 262144 --build $build \
  --transport rdma:dev=rxe0
echo "== coll part: all passed"
EOF2
)
# tests/run_vm_suites.sh (meson's rdma-vm) collects the parts and boots the VM once for all.
if [ -n "${GW_VM_PART:-}" ]; then printf '%s\n' "$inner" >"$GW_VM_PART"; exit 0; fi
exec bash "$src/usertools/gw-rxe-vm.sh" --timeout 420 -- bash -c "$inner"
