#!/usr/bin/env bash
# Build the unit and tcp suites with AddressSanitizer + UndefinedBehaviorSanitizer and run them.
# The build is gw-fuzz.sh's (clang, -O1, ASan+UBSan, the fuzz targets beside), so CI compiles
# one sanitizer build for both stages: GW_FUZZ_BUILD_DIR=build-asan gw-fuzz.sh then only runs.
# Usage: usertools/gw-asan.sh [meson test args]. Ends with "N passed, N failed".
# A failed build leaves build-asan-failed.json (a meson-style record for gw-test-summary.py).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
dir=${GW_ASAN_BUILD_DIR:-build-asan}
fail_build() {
  echo '{"name": "asan-build", "result": "FAIL"}' > "$dir-failed.json"
  echo "0 passed, 1 failed"
  exit 1
}
GW_FUZZ_BUILD_DIR=$dir bash usertools/gw-fuzz.sh -B || fail_build
# Only what the unit and tcp suites run, not every driver, app and suite (2 cores).
ninja -C "$dir" -j "${GW_JOBS:-$(nproc)}" apps/gw-perf/gw-perf apps/gw-incast/gw-incast \
  tests/unit/test_unit \
  tests/conformance/test_conformance tests/conformance/test_conformance_faults \
  tests/bootstrap/test_group || fail_build
rm -f "$dir-failed.json"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# install-consumer installs the whole build: it runs in the plain build only.
tests=$(meson test -C "$dir" --list --no-rebuild --suite unit --suite tcp 2>/dev/null |
  sed 's|.* / ||' | grep -vx install-consumer)
# shellcheck disable=SC2086
meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 1 --timeout-multiplier 3 \
  $tests "$@"
python3 usertools/gw-test-summary.py "$dir/meson-logs/testlog.json"
