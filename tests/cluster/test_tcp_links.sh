#!/usr/bin/env bash
# meson test 'cluster-tcp-links' (issue 44): one flow over two links, one of them cut in the
# middle. 2 hosts x 2 links of 200 Mbit/s; gw-perf sends 1 MiB messages for 5 s over
# tcp:ifaces=<both links>, checking every byte; host 2's link 1 goes down 1.5 s in and comes
# back 1.5 s later. Required: both ranks exit 0 with 0 wrong bytes, the cut link given up
# within 1 s of the cut (its bytes sent again on the other), a stream joined over it again
# once it is back, and a clean bed. Figures: usertools/gw-links.sh.
# Usage: test_tcp_links.sh GW_CLUSTER_SH GW_PERF
set -uo pipefail
script=$1 perf=$2
fail() { echo "cluster-tcp-links FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces and tc (CI runs as root)"
id=t$(( $$ % 100000 ))
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
GW_LOG_LEVEL=info bash "$script" --id "$id" --hosts 2 --links 2 --rate 200mbit --timeout 40 \
  --logs "$logs" -- "$perf" -t 'tcp:ifaces={ifaces}' -s 1M -D 5 --check --json --stats \
  >"$logs/out" 2>&1 &
run=$!
for _ in $(seq 50); do  # the bed is up once both ranks log
  [ -s "$logs/rank1.log" ] && break
  sleep 0.1
done
sleep 1.5
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
/usr/bin/python3 - "$logs" "$cut" "$back" <<'EOF' || exit 1
import datetime, re, sys
logs, cut, back = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
text = open(f"{logs}/rank0.log").read() + open(f"{logs}/rank1.log").read()
day = datetime.datetime.fromtimestamp(cut).date()
def stamps(pattern):
    out = []
    for m in re.finditer(r"^\[(\d\d):(\d\d):(\d\d)\.(\d{3})\][^\n]*" + pattern, text, re.M):
        h, mi, s, ms = map(int, m.groups())
        out.append(datetime.datetime(day.year, day.month, day.day, h, mi, s, ms * 1000).timestamp())
    return out
bad = []
gone = [t for t in stamps(r"\(link 1\)[^\n]*given up: link 1") if t >= cut - 0.05]
if not gone:
    bad.append("the cut link was never given up")
elif min(gone) - cut > 1.0:
    bad.append(f"the cut link was given up {min(gone) - cut:.2f} s after the cut (bound 1 s)")
again = [t for t in stamps(r"joined over link 1") if t >= back - 0.05]
if not again:
    bad.append("no stream joined over link 1 after it came back")
resent = sum(int(x) for x in re.findall(r"resent_bytes (\d+)", text))
if bad:
    print("cluster-tcp-links FAILED: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"cluster-tcp-links: ok (link given up {min(gone) - cut:.2f} s after the cut, "
      f"{resent} bytes sent again, joined again {min(again) - back:.2f} s after it came back, "
      "0 wrong bytes)")
EOF
