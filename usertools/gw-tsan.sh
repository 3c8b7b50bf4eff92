#!/usr/bin/env bash
# Build gradwire with ThreadSanitizer (build-tsan) and run the unit, tcp, bootstrap and coll
# suites under it; any TSan report fails the test it happens in. Suppressions, each with its
# reason: tests/tsan.supp. Usage: usertools/gw-tsan.sh [meson test args]
# Ends with "N passed, N failed" (gw-test-summary.py).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${GW_TSAN_BUILD_DIR:-build-tsan}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" -Db_sanitize=thread -Db_lundef=false -Dunity="${GW_UNITY:-on}" \
    -Dunity_size=8 >/dev/null ||
    { echo '{"name": "tsan-build", "result": "FAIL"}' > "$dir-failed.json"; exit 1; }
fi
# Only what the four suites run (their tests, the two apps of their smoke tests, gw-doctor for
# coll-flight), not the dpdk/rdma suites' binaries nor the other apps.
ninja -C "$dir" -j "${GW_JOBS:-$(nproc)}" apps/gw-perf/gw-perf apps/gw-coll-perf/gw-coll-perf \
  apps/gw-incast/gw-incast \
  tests/unit/test_unit tests/conformance/test_conformance \
  tests/conformance/test_conformance_faults tests/bootstrap/test_bootstrap \
  tests/bootstrap/test_group tests/coll/test_coll_kernels tests/coll/test_coll \
  tests/coll/test_coll_alltoall tests/coll/test_coll_flight tests/coll/gw-fail-probe \
  apps/gw-doctor/gw-doctor ||
  { echo '{"name": "tsan-build", "result": "FAIL"}' > "$dir-failed.json"; exit 1; }
rm -f "$dir-failed.json"
# halt_on_error: a report ends the test binary with exitcode 66, so the test fails (meson
# shows it); second_deadlock_stack: both stacks of a lock-order inversion.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
TSAN_OPTIONS+=" suppressions=$PWD/tests/tsan.supp"
# Every test of the four suites but two. install-consumer installs the whole build, and this
# one builds only what the suites run (it runs in the plain and ASan builds). coll-dpdk runs
# the coll suite over dpdk's ring bus: Debian's DPDK is not built with TSan, so the locks of
# its vdev bus and the rings and mempools that hand mbufs between rank threads are invisible
# to it, and it reports races inside DPDK (rte_pktmbuf_reset after a mempool round trip,
# librte_bus_vdev's device list when ranks open ports at once). tests/tsan.supp has more.
# coll-alltoall-dpdk is the same for the alltoall suite. coll-stop-memif runs gw-fail-probe over memif: the same DPDK, in processes. rdma-vm (coll suite too) runs
# in the soft-RoCE VM over libibverbs and rdma_rxe, which TSan cannot see either (and it needs
# the C API's test and the PyTorch backend, which this build leaves out). coll-shrink (six
# processes per case, 20 regrow cycles) is left to the plain and ASan builds for time; its
# threads-only twin, the gtest CollShrink.*, runs here inside test_coll.
# The inet6 variants of the conformance suites differ from tcp only in the address family (no
# thread does anything else), and the 64 MiB both-ways copies take minutes under TSan: both
# run in the plain and ASan builds, not here (about 1 minute of CI).
export GTEST_FILTER=${GTEST_FILTER:-"-*/tcp_inet6*:*SixtyFourMiBBothWays*"}
tests=$(meson test -C "$dir" --list --no-rebuild --suite unit --suite tcp --suite bootstrap \
  --suite coll 2>/dev/null | sed 's|.* / ||' | grep -vx -e install-consumer -e coll-dpdk \
  -e coll-alltoall-dpdk -e coll-stop-memif -e rdma-vm -e coll-shrink)
# shellcheck disable=SC2086
meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 1 --timeout-multiplier 4 \
  $tests "$@"
python3 usertools/gw-test-summary.py "$dir/meson-logs/testlog.json"
