#!/usr/bin/env bash
# transport.progress on rdma, A/B inside one soft-RoCE VM boot: each round runs the same build
# with the progress thread (thread) and without (caller), in alternating order: allreduce
# 4 KiB and 4 MiB (gw-coll-perf, 2 ranks) and PS push+pull 4 KiB (gw-ps-perf, 1 server, 2
# workers). Lines "rR MODE WHAT: TIME_US" (ps: its CSV row, time in the 4th field);
# GW_AB_AA=1 adds a second thread run per round (mode thread2: the A/A). Summary: the
# per-round ratios caller/thread (docs/bench-rdma.md):
#   usertools/gw-rxe-vm.sh --timeout 1500 -- tests/rdma/progress_ab_in_vm.sh ROUNDS BUILD >LOG
set -u
rounds=$1 b=$2
t=rdma:dev=rxe0
for r in $(seq 1 "$rounds"); do
  modes="thread caller"
  [ $((r % 2)) = 0 ] && modes="caller thread"
  [ "${GW_AB_AA:-0}" = 1 ] && modes="$modes thread2"
  for m in $modes; do
    p=${m%2}
    for s in 4K 4M; do
      n=200; [ "$s" = 4M ] && n=10
      out=$(GW_TRANSPORT_PROGRESS=$p GW_LOG_LEVEL=warn "$b/apps/gw-coll-perf/gw-coll-perf" \
            --ranks 2 -t $t -b $s -e $s -n $n -w 5 2>&1)
      echo "r$r $m allreduce-$s: $(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $5}' | tail -1)"
    done
    out=$(GW_TRANSPORT_PROGRESS=$p GW_LOG_LEVEL=warn "$b/apps/gw-ps-perf/gw-ps-perf" --ranks 3 \
          --servers 1 -s 4K -n 200 -t $t --no-ring --csv /tmp/ps-ab.csv 2>&1)
    echo "r$r $m ps-4K: $(tail -1 /tmp/ps-ab.csv)"
  done
done
