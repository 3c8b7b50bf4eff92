#!/usr/bin/env bash
# Eager against rendezvous at the sizes around rdma.eager_bytes, inside one soft-RoCE VM boot:
#   usertools/gw-rxe-vm.sh --timeout 1500 -- tests/rdma/crossover_in_vm.sh BUILD [ROUNDS] >LOG
#   tests/rdma/bench_summary.py LOG      # medians, and per size rendezvous / eager per round
# Each round and size runs gw-perf with every message eager (eager_bytes=65536) and with every
# message by rendezvous (eager_bytes=1024): latency (--busy, t_typical) and bandwidth
# (blocking, the default). The default eager_bytes is the largest size where eager still wins.
set -u
build=${1:-build}
rounds=${2:-3}
perf=$build/apps/gw-perf/gw-perf
gw() {  # gw-perf, both ranks forked; prints the result row
  $perf --ranks 2 "$@" 2>&1 | grep -E '^ [0-9]|rror' | tail -1
}
for r in $(seq 1 "$rounds"); do
  echo "## round $r"
  for s in 2048 4096 8192 16384 32768 65536; do
    n=$(( s >= 16384 ? 300 : 1000 ))
    for m in eager:65536 rendezvous:1024; do
      t="rdma:dev=rxe0,eager_bytes=${m#*:}"
      echo "gw-perf ${m%%:*} lat -s $s -n 500 --busy: $(gw -t "$t" --test lat --busy -s $s -n 500)"
      echo "gw-perf ${m%%:*} bw -s $s -n $n: $(gw -t "$t" -s $s -n $n)"
    done
  done
done
