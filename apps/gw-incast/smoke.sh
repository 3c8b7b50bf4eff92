#!/usr/bin/env bash
# meson test 'gw-incast-smoke': 3 local ranks over tcp loopback (2 senders into rank 0) for 1 s;
# every word checked and both senders reported. Not a speed test.
# Usage: smoke.sh GW_INCAST OUT_PREFIX
set -uo pipefail
bin=$1 out=$2
port=$((20000 + $$ % 10000))
pids=()
for r in 0 1 2; do
  GW_RANK=$r GW_WORLD_SIZE=3 GW_MASTER_ADDR=127.0.0.1 GW_MASTER_PORT=$port \
    "$bin" -s 65536 --seconds 1 --json >"$out.$r" 2>&1 &
  pids+=($!)
done
rc=0
for r in 0 1 2; do wait "${pids[$r]}" || { echo "rank $r failed:"; cat "$out.$r"; rc=1; }; done
cat "$out.0"
grep -q '"wrong":0' "$out.0" || { echo "FAIL: wrong words or no summary"; rc=1; }
[ "$(grep -c '^sender' "$out.0")" = 2 ] || { echo "FAIL: not both senders reported"; rc=1; }
rm -f "$out".?
exit $rc
