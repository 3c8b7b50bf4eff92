#!/usr/bin/env bash
# Side-by-side figures inside one soft-RoCE VM boot (docs/bench-rdma.md):
#   usertools/gw-rxe-vm.sh --timeout 900 -- tests/rdma/bench_in_vm.sh BUILD_DIR
# perftest (ib_write_bw, ib_send_bw at 4 KiB/64 KiB/1 MiB; ib_send_lat, ib_write_lat at
# 2 B/4 KiB; all busy-poll), then gw-perf over rdma (rxe0; blocking and --busy; one and two
# queue pairs) and over tcp (dummy0, the same IP path). Prints one line per run.
set -u
build=${1:-build}
perf=$build/apps/gw-perf/gw-perf
ip=10.99.0.1
echo "## $(date -u '+%F %T UTC'), VM load $(cut -d' ' -f1-3 /proc/loadavg)"
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
iters() { echo $(( $1 >= 1048576 ? 40 : $1 >= 65536 ? 300 : 1000 )); }
gw() {  # gw-perf, both ranks forked; prints the result row
  $perf --ranks 2 "$@" 2>&1 | grep -E '^ [0-9]|rror' | tail -1
}
echo "## perftest"
for s in 4096 65536 1048576; do
  n=$(iters $s)
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
    n=$(iters $s)
    echo "gw-perf -t $t bw -s $s -n $n: $(gw -t $t -s $s -n $n)"
    echo "gw-perf -t $t bw -s $s -n $n --busy: $(gw -t $t -s $s -n $n --busy)"
  done
  for s in 2 4096; do
    echo "gw-perf -t $t lat -s $s -n 500: $(gw -t $t --test lat -s $s -n 500)"
    echo "gw-perf -t $t lat -s $s -n 500 --busy: $(gw -t $t --test lat --busy -s $s -n 500)"
  done
done
for s in 65536 1048576; do
  n=$(iters $s)
  echo "gw-perf -d rxe0 -x 1 -q 2 bw -s $s -n $n --busy: $(gw -d rxe0 -x 1 -q 2 -s $s -n $n --busy)"
done
