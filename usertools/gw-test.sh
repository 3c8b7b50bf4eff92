#!/usr/bin/env bash
# Set up, build and run every test suite this machine can run; ends with "N passed, N failed".
# Usage: usertools/gw-test.sh [meson test args, e.g. --suite unit]
set -uo pipefail
cd "$(dirname "$0")/.."
bash usertools/gw-deps.sh || exit 1
bash usertools/gw-build.sh || { echo "0 passed, 1 failed"; exit 1; }
dir=${GW_BUILD_DIR:-build}
# The rdma suite boots a soft-RoCE VM; let it install its packages (qemu, a Debian kernel).
export GW_RXE_INSTALL=${GW_RXE_INSTALL:-1}
meson test -C "$dir" --print-errorlogs --num-processes 1 "$@"
python3 usertools/gw-test-summary.py "$dir/meson-logs/testlog.json"
