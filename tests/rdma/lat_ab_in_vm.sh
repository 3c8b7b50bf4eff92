#!/usr/bin/env bash
# Latency A/B inside one soft-RoCE VM boot: each round runs ib_send_lat, then `gw-perf lat
# --busy` from every build dir given, at 2 B and 4 KiB (docs/bench-rdma.md, fifth session):
#   usertools/gw-rxe-vm.sh --timeout 1500 -- tests/rdma/lat_ab_in_vm.sh ROUNDS BUILD... >LOG
#   tests/rdma/lat_ab_summary.py LOG
# Build dirs must be readable at the same path inside the VM (the host's root is).
set -u
rounds=$1; shift
ip=10.99.0.1
pt() {  # perftest server + client; prints the client's result line
  timeout 120 ib_send_lat -d rxe0 -x 1 "$@" >/tmp/srv.log 2>&1 &
  local out=""
  for _ in 1 2 3 4 5 6 7 8 9 10; do  # the server may take seconds to listen under TCG
    sleep 2
    out=$(timeout 120 ib_send_lat -d rxe0 -x 1 "$@" $ip 2>&1) && break
  done
  echo "$out" | grep -E '^ *[0-9]+ +[0-9]+' | tail -1
  wait
}
for r in $(seq 1 "$rounds"); do
  for s in 2 4096; do
    echo "r$r ib_send_lat $s: $(pt -s $s -n 1000)"
    for b in "$@"; do
      out=$("$b/apps/gw-perf/gw-perf" --ranks 2 -t rdma:dev=rxe0 --test lat --busy -s $s \
            -n 1000 2>&1)
      echo "r$r $b $s: $(echo "$out" | grep -E '^ [0-9]|rror' | tail -1)"
    done
  done
done
