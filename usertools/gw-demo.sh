#!/usr/bin/env bash
# Set up, build and run the main job on this machine's own loopback devices: gw-perf
# bandwidth and latency between two local ranks over every transport that is built.
set -euo pipefail
cd "$(dirname "$0")/.."
bash usertools/gw-deps.sh
bash usertools/gw-build.sh
dir=${GW_BUILD_DIR:-build}
perf="$dir/apps/gw-perf/gw-perf"
echo "== gw-perf over TCP loopback (2 ranks): bandwidth =="
"$perf" --ranks 2 -t tcp:iface=lo --test bw -a --check
echo "== gw-perf over TCP loopback (2 ranks): latency =="
"$perf" --ranks 2 -t tcp:iface=lo --test lat -a
