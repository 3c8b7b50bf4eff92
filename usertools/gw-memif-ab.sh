#!/usr/bin/env bash
# Bulk bandwidth over dpdk memif, old build against new, beside gradwire TCP loopback, in one
# run: each round runs every size old memif, new memif, tcp (new build's gw-perf), so a drift
# of the machine's speed hits all three alike. Prints each run, then per size the medians and
# the median of the per-round ratios.
#   usertools/gw-memif-ab.sh OLD_BUILD NEW_BUILD [ROUNDS] [SIZES] [NEW_EXTRA]
# Defaults: 5 rounds, sizes "1M:4000 8M:500" (SIZE:ITERATIONS: a fixed amount of traffic, 4 GiB,
# a few seconds per run; gw-perf -D sizes its runs from the warm-up and gave 0.1-0.5 s ones).
# NEW_EXTRA: more transport keys for the new build's memif spec (e.g. ",mtu=1500").
set -euo pipefail
OLD=$1/apps/gw-perf/gw-perf
NEW=$2/apps/gw-perf/gw-perf
ROUNDS=${3:-5}
SIZES=${4:-1M:4000 8M:500}
EXTRA=${5:-}
export GW_LOG_LEVEL=${GW_LOG_LEVEL:-warn}
port=18800
log=$(mktemp /tmp/gw-memif-ab.XXXXXX)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
# one RUN_NAME SIZE:ITERS BINARY SPEC: the average MB/s of gw-perf --ranks 2 (0: it failed)
one() {
  port=$((port + 1))
  local out
  out=$(timeout 120 "$3" --ranks 2 -p $port -t "$4" --test bw -s "${2%:*}" -n "${2#*:}" 2>&1 \
        | awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $4}' | tail -1) || true
  echo "$1 ${2%:*} ${out:-0}" | tee -a "$log"
}
for r in $(seq "$ROUNDS"); do
  for s in $SIZES; do
    sock=/tmp/gw-memif-ab-$$-$r.sock
    rm -f "$sock"
    one old "$s" "$OLD" "dpdk:vdev=net_memif0,role=auto,socket=$sock"
    rm -f "$sock"
    one new "$s" "$NEW" "dpdk:vdev=net_memif0,role=auto,socket=$sock$EXTRA"
    rm -f "$sock"
    one tcp "$s" "$NEW" tcp
  done
  echo "# round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
/usr/bin/python3 - "$log" <<'PY'
import statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    name, size, mbs = line.split()
    runs.setdefault(size, {}).setdefault(name, []).append(float(mbs))
print("| size | old memif MB/s | new memif MB/s | tcp MB/s | new/old | new/tcp | old/tcp |")
print("|---|---:|---:|---:|---:|---:|---:|")
for size, r in runs.items():
    med = {k: st.median(v) for k, v in r.items()}
    rat = lambda a, b: st.median(x / y for x, y in zip(r[a], r[b]) if y > 0)
    print(f"| {size} | {med['old']:.0f} | {med['new']:.0f} | {med['tcp']:.0f} | "
          f"{rat('new', 'old'):.2f}x | {rat('new', 'tcp'):.2f}x | {rat('old', 'tcp'):.2f}x |")
PY
rm -f "$log"
echo "# end: load $(cut -d' ' -f1-3 /proc/loadavg)"
