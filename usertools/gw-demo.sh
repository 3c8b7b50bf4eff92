#!/usr/bin/env bash
# Set up, build and run the main job on this machine's own loopback devices: gw-compare, the
# same workloads over every transport that can run here (tcp sleeping and busy, dpdk over
# memif and over af_packet on a veth pair between two namespaces), with iperf3, sockperf,
# dpdk-testpmd, UCX (ucx_perftest) and libfabric (fi_pingpong) in the same run, Open MPI and
# Gloo on the allreduce rows (apps/gw-baseline); speed and cost
# (CPU, system calls, context switches) side by side. Run as root, gw-compare mounts tracefs
# when it is missing (the system-call counts need it) and says so.
#   usertools/gw-demo.sh [gw-compare options]     e.g. --quick, --rdma-vm, --profile
# Writes $GW_BUILD_DIR/gw-compare/{index.html,results.json,results.csv} too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash usertools/gw-deps.sh
bash usertools/gw-build.sh
dir=${GW_BUILD_DIR:-build}
out="$dir/gw-compare"
mkdir -p "$out"
"$dir/apps/gw-compare/gw-compare" --build-dir "$dir" --report "$out" --json "$out/results.json" \
  --csv "$out/results.csv" "$@"
