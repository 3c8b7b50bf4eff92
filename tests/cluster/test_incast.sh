#!/usr/bin/env bash
# meson test 'cluster-incast' (issue 44): 3 senders into 1 over dpdk af_packet on the bed
# (4 hosts, 1 Gbit/s links, 5 ms switch queue), 256 KiB messages for 2 s (gw-incast): every
# word checked, every rank exits 0, retransmitted packets <= 5 % of those sent, and the bed
# is left clean. The full 7 -> 1 table is usertools/gw-incast.sh.
# Usage: test_incast.sh GW_CLUSTER_SH GW_INCAST
set -uo pipefail
script=$1 bin=$2
fail() { echo "cluster-incast FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces and tc (CI runs as root)"
id=i$(( $$ % 100000 ))
out=$(bash "$script" --id "$id" --hosts 4 --rate 1gbit --timeout 60 -- "$bin" \
      -t 'dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface}' -s 262144 --seconds 2 --json)
rc=$?
echo "$out" | grep -v '^\['
bash "$script" --id "$id" check-clean || fail "the test bed left namespaces or links"
[ "$rc" -eq 0 ] || fail "a rank failed (exit $rc)"
json=$(grep '^{' <<<"$out") || fail "no summary from rank 0"
/usr/bin/python3 - "$json" <<'EOF2' || exit 1
import json, sys
r = json.loads(sys.argv[1])
bad = []
if r["senders"] != 3: bad.append(f"{r['senders']} senders, expected 3")
if r["wrong"] != 0: bad.append(f"{r['wrong']} wrong words")
if r["retx_pct"] > 5: bad.append(f"{r['retx_pct']:.2f} % of packets retransmitted (limit 5 %)")
if r["gbps"] <= 0: bad.append("no goodput")
if bad:
    print("cluster-incast FAILED: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"cluster-incast: ok ({r['gbps']:.3f} Gbit/s, Jain {r['jain']:.3f}, "
      f"{r['retx_pct']:.2f} % retransmitted, 0 wrong words)")
EOF2
