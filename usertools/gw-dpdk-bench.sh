#!/usr/bin/env bash
# gw-perf over DPDK memif (two processes: memif server and client) beside gw-perf over TCP
# loopback, and memif goodput under injected loss. Figures for docs/bench-dpdk.md.
#   usertools/gw-dpdk-bench.sh [BUILD_DIR]      (default build)
set -euo pipefail
B=${1:-build}
P=$B/apps/gw-perf/gw-perf
export GW_LOG_LEVEL=${GW_LOG_LEVEL:-warn}
port=18700
# run "SPEC_SERVER" "SPEC_CLIENT" gw-perf-args...: prints the client's result line
run() {
  local ss=$1 cs=$2; shift 2
  port=$((port + 1))
  timeout 120 "$P" -t "$ss" -p $port "$@" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  timeout 120 "$P" -t "$cs" -p $port "$@" 127.0.0.1 2>&1 | grep -E '^ *[0-9]+ ' || echo "  (failed)"
  wait $srv || true
}
memif() {  # memif specs for server and client, extra device arguments in $1
  local s=/tmp/gw-bench-$$-$port.sock
  rm -f "$s"
  echo "dpdk:vdev=net_memif0,role=server,socket=$s$1" "dpdk:vdev=net_memif0,role=client,socket=$s$1"
}
echo "== latency, 64 B, busy polling (half round trip, usec) =="
echo "-- dpdk memif";     run $(memif "") --test lat -s 64 -n 20000 --busy
echo "-- tcp loopback";   run tcp tcp --test lat -s 64 -n 20000 --busy
echo "-- tcp loopback, blocking wait"; run tcp tcp --test lat -s 64 -n 20000
for s in 64 65536 1M; do
  echo "== bandwidth, $s B, unidirectional =="
  echo "-- dpdk memif";   run $(memif "") --test bw -s $s -D 2 --busy
  echo "-- tcp loopback"; run tcp tcp --test bw -s $s -D 2 --busy
done
for loss in 0.001 0.01; do
  echo "== memif goodput, 1 MiB messages, tx_drop=$loss on both sides =="
  run $(memif ",tx_drop=$loss") --test bw -s 1M -D 2 --busy
done
