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
if [ -f "$dir/drivers/libgw_drv_dpdk.a" ]; then
  # DPDK over a memif pair: two processes, server and client, as perftest runs.
  sock=/tmp/gw-demo-memif-$$.sock
  for test in lat bw; do
    echo "== gw-perf over DPDK memif (2 processes, --no-huge): $test =="
    timeout 120 "$perf" -t "dpdk:vdev=net_memif0,role=server,socket=$sock" --test $test -s 4K \
      --busy -p 18620 >/dev/null &
    server=$!
    sleep 1
    timeout 120 "$perf" -t "dpdk:vdev=net_memif0,role=client,socket=$sock" --test $test -s 4K \
      --busy -p 18620 127.0.0.1
    wait $server
  done
  rm -f "$sock"
fi
