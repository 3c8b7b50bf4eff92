#!/usr/bin/env bash
# meson tests 'cluster-tcp-links' and 'cluster-dpdk-links' (issue 44): one flow over two
# links, one of them cut in the middle. 2 hosts x 2 links of 200 Mbit/s; gw-perf sends 1 MiB
# messages for 5 s over tcp:ifaces=<both links> (or dpdk af_packet ports on both), checking
# every byte; host 2's link 1 goes down 1 s after the transfer runs on it and comes back 1.5 s later. Required: both
# ranks exit 0 with 0 wrong bytes, the cut link given up (tcp) / taken out (dpdk) within 1 s
# of the cut, its bytes sent again on the other, the link carrying again once it is back (tcp:
# a stream joined over it; dpdk: a probe answered), and a clean bed. Figures:
# usertools/gw-links.sh.
# Usage: test_links_cut.sh GW_CLUSTER_SH GW_PERF [tcp|dpdk]
set -uo pipefail
script=$1 perf=$2 kind=${3:-tcp}
name=cluster-$kind-links
fail() { echo "$name FAILED: $*" >&2; exit 1; }
if [ "$kind" = dpdk ]; then
  transport='dpdk:vdev=net_af_packet0;qdisc_bypass=0,ifaces={ifaces}'
else
  transport='tcp:ifaces={ifaces}'
fi
[ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces and tc (CI runs as root)"
id=t$(( $$ % 100000 ))
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
GW_LOG_LEVEL=info bash "$script" --id "$id" --hosts 2 --links 2 --rate 200mbit --timeout 40 \
  --logs "$logs" -- "$perf" -t "$transport" -s 1M -D 5 --check --json --stats \
  >"$logs/out" 2>&1 &
run=$!
# Cut once the transfer runs on link 1 (2 MB through it): the bound counts from the cut, and a
# slow start (EAL set-up, connect) must not put the cut before the link carries anything.
l1_bytes() {
  ip netns exec "gwk$id-h2" cat /sys/class/net/gwk${id}h2l1/statistics/{rx,tx}_bytes 2>/dev/null |
    awk '{s += $1} END {print s + 0}'
}
for _ in $(seq 200); do
  [ "$(l1_bytes)" -ge 2000000 ] && break
  kill -0 "$run" 2>/dev/null || break
  sleep 0.05
done
[ "$(l1_bytes)" -ge 2000000 ] || fail "link 1 of host 2 carried no transfer within 10 s"
sleep 1
cut=$(date +%s.%N)
bash "$script" --id "$id" link 2 1 down || fail "link 2 1 down"
sleep 1.5
bash "$script" --id "$id" link 2 1 up || fail "link 2 1 up"
back=$(date +%s.%N)
wait "$run"
rc=$?
cat "$logs/out"
bash "$script" --id "$id" check-clean || fail "the test bed left namespaces or links"
[ "$rc" -eq 0 ] || { cat "$logs"/rank*.log; fail "a rank failed (exit $rc)"; }
json=$(grep -h '^{' "$logs/rank1.log") || fail "no result from the client"
grep -q '"check_errors":0' <<<"$json" || fail "wrong bytes: $json"
/usr/bin/python3 - "$logs" "$cut" "$back" "$kind" <<'EOF' || exit 1
import datetime, re, sys
logs, cut, back, kind = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
name = f"cluster-{kind}-links"
if kind == "dpdk":
    out_re, again_re, verb = r"link 1 to [^\n]*taken out", r"link 1 to [^\n]*carries again", "taken out"
else:
    out_re, again_re, verb = r"\(link 1\)[^\n]*given up: link 1", r"joined over link 1", "given up"
text = open(f"{logs}/rank0.log").read() + open(f"{logs}/rank1.log").read()
day = datetime.datetime.fromtimestamp(cut).date()
def stamps(pattern):
    out = []
    for m in re.finditer(r"^\[(\d\d):(\d\d):(\d\d)\.(\d{3})\][^\n]*" + pattern, text, re.M):
        h, mi, s, ms = map(int, m.groups())
        out.append(datetime.datetime(day.year, day.month, day.day, h, mi, s, ms * 1000).timestamp())
    return out
bad = []
gone = [t for t in stamps(out_re) if t >= cut - 0.05]
if not gone:
    bad.append(f"the cut link was never {verb}")
elif min(gone) - cut > 1.0:
    bad.append(f"the cut link was {verb} {min(gone) - cut:.2f} s after the cut (bound 1 s)")
again = [t for t in stamps(again_re) if t >= back - 0.05]
if not again:
    bad.append("link 1 did not carry again after it came back")
resent = sum(int(x) for x in re.findall(r"(?:resent_bytes|link_resent) (\d+)", text))
if resent == 0:
    bad.append("nothing was sent again on the other link")
if bad:
    print(f"{name} FAILED: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
unit = "packets" if kind == "dpdk" else "bytes"
print(f"{name}: ok (link {verb} {min(gone) - cut:.2f} s after the cut, {resent} {unit} sent "
      f"again, carrying again {min(again) - back:.2f} s after it came back, 0 wrong bytes)")
EOF
