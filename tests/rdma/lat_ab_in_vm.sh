#!/usr/bin/env bash
# Latency A/B inside one soft-RoCE VM boot: each round runs ib_send_lat, then `gw-perf lat
# --busy` from every build dir given, at 2 B and 4 KiB (docs/bench-rdma.md, "Latency: the bracketed A/A method"):
#   usertools/gw-rxe-vm.sh --timeout 1500 -- tests/rdma/lat_ab_in_vm.sh ROUNDS BUILD... >LOG
#   tests/rdma/lat_ab_summary.py LOG
# Build dirs must be readable at the same path inside the VM (the host's root is).
# GW_LAT_ITERS sets -n of every run (default 1000, perftest's). GW_LAT_AA=1 runs ib_send_lat
# a second time each round (label ib_send_lat#2): its ratio to the first is what the VM's
# noise alone does to a ratio (an A/A test).
set -u
rounds=$1; shift
n=${GW_LAT_ITERS:-1000}
. "$(dirname "$0")/perftest_pair.sh"
for r in $(seq 1 "$rounds"); do
  for s in 2 4096; do
    echo "r$r ib_send_lat $s: $(pt ib_send_lat -s $s -n $n)"
    for b in "$@"; do
      out=$("$b/apps/gw-perf/gw-perf" --ranks 2 -t rdma:dev=rxe0 --test lat --busy -s $s \
            -n $n 2>&1)
      echo "r$r $b $s: $(echo "$out" | grep -E '^ [0-9]|rror' | tail -1)"
    done
    if [ "${GW_LAT_AA:-0}" = 1 ]; then
      echo "r$r ib_send_lat#2 $s: $(pt ib_send_lat -s $s -n $n)"
    fi
  done
done
