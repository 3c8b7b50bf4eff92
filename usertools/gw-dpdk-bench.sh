#!/usr/bin/env bash
# gw-perf over DPDK memif (two processes: memif server and client) beside gw-perf over TCP
# loopback in the same run, dpdk-testpmd on the same kind of memif pair, and memif goodput
# under injected loss. Figures for BENCHMARKS.md; how to read them: docs/bench-dpdk.md.
#   usertools/gw-dpdk-bench.sh [BUILD_DIR] [SECONDS] [SECTIONS] [ROUNDS]
# Defaults: build, 2, "lat bw testpmd loss", 1. ROUNDS repeats the loss rows, interleaved
# (lossless, 0.1 %, 1 %, 5 %, then again): on a busy 2-CPU machine one run of each swings.
# Needs dpdk-testpmd (Debian package dpdk) for the testpmd rows; they are skipped without it.
set -euo pipefail
B=${1:-build}
D=${2:-2}
SECTIONS=${3:-lat bw testpmd loss}
ROUNDS=${4:-1}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
P=$B/apps/gw-perf/gw-perf
export GW_LOG_LEVEL=${GW_LOG_LEVEL:-warn}
port=18700
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
# run "SPEC_SERVER" "SPEC_CLIENT" gw-perf-args...: prints the client's result line
run() {
  local ss=$1 cs=$2; shift 2
  port=$((port + 1))
  timeout 120 "$P" -t "$ss" -p $port "$@" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  timeout 120 "$P" -t "$cs" -p $port "$@" 127.0.0.1 > /tmp/gw-bench-$$.out 2>&1 || true
  grep -E '^ *[0-9]+ ' /tmp/gw-bench-$$.out || { echo "  (failed)"; tail -2 /tmp/gw-bench-$$.out; }
  wait $srv || true
}
memif() {  # memif specs for server and client, extra device arguments in $1
  local s=/tmp/gw-bench-$$-$port.sock
  rm -f "$s"
  echo "dpdk:vdev=net_memif0,role=server,socket=$s$1" "dpdk:vdev=net_memif0,role=client,socket=$s$1"
}
# testpmd MODE_SERVER MODE_CLIENT: packets per second that the server side receives (64 B)
testpmd() {
  port=$((port + 1))  # a fresh EAL file prefix per run: testpmd may crash when its peer leaves
  local s=/tmp/gw-bench-tp-$$-$port.sock eal="--lcores 0@(0-1),1@(0-1) --no-huge -m 512 --no-pci"
  local app="--nb-cores=1 --total-num-mbufs=16384 --stats-period 2 -a"
  rm -f "$s"
  timeout $((D + 14)) dpdk-testpmd $eal --file-prefix gwtpa$$-$port \
    --vdev "net_memif0,role=server,socket=$s,socket-abstract=no" -- --forward-mode="$1" $app \
    > /tmp/gw-bench-tpa-$$.log 2>&1 &
  local srv=$!
  sleep 1.5
  timeout $((D + 10)) dpdk-testpmd $eal --file-prefix gwtpb$$-$port \
    --vdev "net_memif0,role=client,socket=$s,socket-abstract=no" -- --forward-mode="$2" $app \
    ${3:-} > /tmp/gw-bench-tpb-$$.log 2>&1 || true
  wait $srv || true
  # the best 2-second interval (the first ones include start-up)
  grep -E 'Rx-pps' /tmp/gw-bench-tpa-$$.log | sort -k2 -n | tail -1 || echo "  (failed)"
  rm -f /tmp/gw-bench-tp*-$$.log "$s"
}
if want lat; then
  echo "== latency, 64 B, busy polling (half round trip, usec) =="
  echo "-- dpdk memif";     run $(memif "") --test lat -s 64 -n 20000 --busy
  echo "-- tcp loopback";   run tcp tcp --test lat -s 64 -n 20000 --busy
  echo "-- tcp loopback, blocking wait"; run tcp tcp --test lat -s 64 -n 20000
fi
if want bw; then
  for s in 64 65536 1M 8M; do
    echo "== bandwidth, $s B, unidirectional, default wait =="
    echo "-- dpdk memif";   run $(memif "") --test bw -s $s -D $D
    echo "-- tcp loopback"; run tcp tcp --test bw -s $s -D $D
  done
fi
if want testpmd && command -v dpdk-testpmd >/dev/null; then
  echo "== dpdk-testpmd on a memif pair, 64 B packets (server Rx-pps) =="
  echo "-- io forwarding both sides (client starts with --tx-first)"
  testpmd io io --tx-first
  echo "-- client txonly, server rxonly"
  testpmd rxonly txonly
fi
if want loss; then
  for r in $(seq "$ROUNDS"); do
    for loss in 0 0.001 0.01 0.05; do
      echo "== memif goodput, 1 MiB messages, tx_drop=$loss on both sides (round $r) =="
      run $(memif ",tx_drop=$loss") --test bw -s 1M -D $D
    done
  done
fi
echo "# end: load $(cut -d' ' -f1-3 /proc/loadavg)"
