#!/usr/bin/env bash
# Issue 20: `gw-perf --ranks 2` with dpdk role=auto made both forked ranks memif servers
# ("Address already in use", then a store timeout). Each rank must take its own role.
# Usage: perf_role_auto.sh GW_PERF
set -euo pipefail
perf=$1
dir=$(mktemp -d /tmp/gw-role-auto.XXXXXX)
trap 'rm -rf "$dir"' EXIT
for test in lat bw; do
  out=$(timeout 120 "$perf" --ranks 2 -t "dpdk:vdev=net_memif0,role=auto,socket=$dir/m.sock" \
        --test $test -s 4K -n 200 --check --timeout 10000 2>&1) || {
    echo "$out" | tail -20
    echo "FAIL: gw-perf --ranks 2 role=auto --test $test"
    exit 1
  }
  if ! grep -q '^ *4096 ' <<<"$out"; then
    echo "$out" | tail -20
    echo "FAIL: no result row for 4096 bytes ($test)"
    exit 1
  fi
  echo "ok: $test"
done
