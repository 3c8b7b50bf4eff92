#!/usr/bin/env bash
# Side-by-side figures inside one soft-RoCE VM boot (docs/bench-rdma.md):
#   usertools/gw-rxe-vm.sh --timeout 1800 -- tests/rdma/bench_in_vm.sh BUILD_DIR [ROUNDS]
# Each round: perftest (ib_write_bw, ib_send_bw at 4 KiB/64 KiB/1 MiB; ib_send_lat,
# ib_write_lat at 2 B/4 KiB; all busy-poll), then gw-perf over rdma (rxe0; blocking and
# --busy; two queue pairs at 64 KiB) and over tcp (dummy0, the same IP path). Rounds
# interleave the tools, so a load spike on the host hits both; one line per run.
set -u
build=${1:-build}
rounds=${2:-3}
perf=$build/apps/gw-perf/gw-perf
. "$(dirname "$0")/perftest_pair.sh"
iters() { echo $(( $1 >= 1048576 ? 40 : $1 >= 65536 ? 300 : 1000 )); }
gw() {  # gw-perf, both ranks forked; prints the result row
  $perf --ranks 2 "$@" 2>&1 | grep -E '^ [0-9]|rror' | tail -1
}
for r in $(seq 1 "$rounds"); do
  echo "## round $r"
  for s in 4096 65536 1048576; do
    n=$(iters $s)
    echo "ib_write_bw -s $s -n $n: $(pt ib_write_bw -s $s -n $n)"
    echo "ib_send_bw -s $s -n $n: $(pt ib_send_bw -s $s -n $n)"
    echo "gw-perf -t rdma:dev=rxe0 bw -s $s -n $n: $(gw -t rdma:dev=rxe0 -s $s -n $n)"
    echo "gw-perf -t rdma:dev=rxe0 bw -s $s -n $n --busy: $(gw -t rdma:dev=rxe0 -s $s -n $n --busy)"
    echo "gw-perf -t tcp:iface=dummy0 bw -s $s -n $n: $(gw -t tcp:iface=dummy0 -s $s -n $n)"
  done
  echo "gw-perf -d rxe0 -x 1 -q 2 bw -s 65536 -n 300 --busy: $(gw -d rxe0 -x 1 -q 2 -s 65536 -n 300 --busy)"
  for s in 2 4096; do
    echo "ib_send_lat -s $s -n 500: $(pt ib_send_lat -s $s -n 500)"
    echo "ib_write_lat -s $s -n 500: $(pt ib_write_lat -s $s -n 500)"
    echo "gw-perf -t rdma:dev=rxe0 lat -s $s -n 500: $(gw -t rdma:dev=rxe0 --test lat -s $s -n 500)"
    echo "gw-perf -t rdma:dev=rxe0 lat -s $s -n 500 --busy: $(gw -t rdma:dev=rxe0 --test lat --busy -s $s -n 500)"
    echo "gw-perf -t tcp:iface=dummy0 lat -s $s -n 500 --busy: $(gw -t tcp:iface=dummy0 --test lat --busy -s $s -n 500)"
  done
done
