#!/usr/bin/env bash
# Incast on the namespace bed (issue 44): 7 senders into 1 receiver over a --rate downlink, and
# 1 sender alone (the uncongested latency), over tcp (the kernel's congestion control) and dpdk
# af_packet (gradwire's own reliability and window, with its receiver credits; dpdk-off:
# dpdk.incast_credits=off), for each message size. Prints one table:
# aggregate goodput / link, Jain's fairness index, retransmitted packets, p99 latency and its
# ratio to the lone sender's. Needs root (gw-cluster.sh) and a build with apps/gw-incast.
#   usertools/gw-incast.sh [-b BUILD] [-r RATE] [-S SECONDS] [-s "65536 1048576 16777216"]
#                          [-t "tcp dpdk dpdk-off"] [-o DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${GW_BUILD_DIR:-build} rate=1gbit secs=6 sizes="65536 1048576 16777216" ts="tcp dpdk"
out=$(mktemp -d /tmp/gw-incast.XXXXXX)
while getopts "b:r:S:s:t:o:" o; do
  case $o in
    b) build=$OPTARG ;; r) rate=$OPTARG ;; S) secs=$OPTARG ;; s) sizes=$OPTARG ;;
    t) ts=$OPTARG ;; o) out=$OPTARG; mkdir -p "$out" ;; *) sed -n 2,7p "$0"; exit 2 ;;
  esac
done
bin=$build/apps/gw-incast/gw-incast
[ -x "$bin" ] || { echo "gw-incast.sh: no $bin (build first)"; exit 2; }
spec() {
  case $1 in
    tcp) echo 'tcp:iface={iface}' ;;
    dpdk) echo 'dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface}' ;;
    dpdk-off) echo 'dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface},incast_credits=off' ;;
  esac
}
run() {  # transport size hosts -> json line in $out/<t>-<size>-<hosts>.json
  local w=4
  [ "$2" -ge 4194304 ] && w=2
  nice -n 5 bash usertools/gw-cluster.sh --hosts "$3" --rate "$rate" --timeout $((secs + 90)) \
    -- "$bin" -t "$(spec "$1")" -s "$2" -w $w --seconds "$secs" --json \
    >"$out/$1-$2-$3.log" 2>&1
  grep '^{' "$out/$1-$2-$3.log" >"$out/$1-$2-$3.json" ||
    { echo "gw-incast.sh: $1 $2 B, $3 hosts failed (log: $out/$1-$2-$3.log)" >&2; return 1; }
}
rc=0
for t in $ts; do
  for s in $sizes; do
    run "$t" "$s" 2 || rc=1
    run "$t" "$s" 8 || rc=1
  done
done
/usr/bin/python3 - "$out" "$rate" "$ts" "$sizes" <<'EOF2'
import json, os, sys
out, rate, ts, sizes = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
units = {"k": 1e3, "m": 1e6, "g": 1e9}
link = float(rate.rstrip("bit")[:-1]) * units[rate.rstrip("bit")[-1].lower()] / 1e9
def load(t, s, h):
    p = os.path.join(out, f"{t}-{s}-{h}.json")
    return json.load(open(p)) if os.path.exists(p) else None
print(f"| transport | message | goodput / link (7 -> 1) | Jain | retransmitted | p99 (7 -> 1) | "
      f"p99 alone | p99 ratio |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for t in ts:
    for s in sizes:
        a, one = load(t, s, 8), load(t, s, 2)
        if not a or not one:
            print(f"| {t} | {int(s) // 1024} KiB | failed | | | | | |")
            continue
        print(f"| {t} | {int(s) // 1024} KiB | {a['gbps'] / link:.2f} | {a['jain']:.3f} | "
              f"{a['retx_pct']:.1f} % | {a['p99_us'] / 1e3:.1f} ms | {one['p99_us'] / 1e3:.1f} ms | "
              f"{a['p99_us'] / one['p99_us']:.1f} |")
EOF2
echo "logs: $out"
exit $rc
