#!/usr/bin/env bash
# Side-by-side figures inside one soft-RoCE VM boot (docs/bench-rdma.md):
#   usertools/gw-rxe-vm.sh --timeout 580 -- tests/rdma/bench_in_vm.sh BUILD_DIR
# perftest (ib_write_bw, ib_send_bw at 4 KiB/64 KiB/1 MiB; ib_send_lat, ib_write_lat at
# 2 B/4 KiB), then gw-perf over rdma (rxe0) and over tcp (dummy0, the same IP path).
set -u
build=${1:-build}
perf=$build/apps/gw-perf/gw-perf
ip=10.99.0.1
pt() {  # perftest server + client; prints the client's result line
  local tool=$1; shift
  timeout 120 $tool -d rxe0 -x 1 "$@" >/tmp/srv.log 2>&1 &
  local out=""
  for _ in 1 2 3 4 5 6 7 8 9 10; do  # the server may take seconds to listen under TCG
    sleep 2
    out=$(timeout 120 $tool -d rxe0 -x 1 "$@" $ip 2>&1) && break
  done
  echo "$out" | grep -E '^ *[0-9]+ +[0-9]+' | tail -1
  wait
}
echo "## perftest"
for s in 4096 65536 1048576; do
  n=$(( s >= 1048576 ? 40 : s >= 65536 ? 300 : 1000 ))
  echo "ib_write_bw -s $s -n $n: $(pt ib_write_bw -s $s -n $n)"
  echo "ib_send_bw  -s $s -n $n: $(pt ib_send_bw -s $s -n $n)"
done
for s in 2 4096; do
  echo "ib_send_lat  -s $s -n 500: $(pt ib_send_lat -s $s -n 500)"
  echo "ib_write_lat -s $s -n 500: $(pt ib_write_lat -s $s -n 500)"
done
echo "## gw-perf"
for t in rdma:dev=rxe0 tcp:iface=dummy0; do
  for s in 4096 65536 1048576; do
    n=$(( s >= 1048576 ? 40 : s >= 65536 ? 300 : 1000 ))
    echo "gw-perf -t $t bw -s $s -n $n:"
    $perf -t $t --ranks 2 -s $s -n $n 2>&1 | tail -2
  done
  for s in 2 4096; do
    echo "gw-perf -t $t lat -s $s -n 500:"
    $perf -t $t --ranks 2 --test lat -s $s -n 500 2>&1 | tail -2
    echo "gw-perf -t $t lat -s $s -n 500 --busy:"
    $perf -t $t --ranks 2 --test lat --busy -s $s -n 500 2>&1 | tail -2
  done
done
