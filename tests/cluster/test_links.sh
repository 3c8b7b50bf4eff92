#!/usr/bin/env bash
# meson test 'cluster-links': gw-cluster.sh with several links per host (issue 44): 3 hosts with
# 2, 2 and 1 links; every link carries pings within its own subnet only (rails do not meet);
# `link H L down` stops exactly that link and `up` brings it back; `link H L rate R` reshapes
# both directions; a host's links are what {ifaces} names; nothing is left after `down`.
# Usage: test_links.sh GW_CLUSTER_SH
set -uo pipefail
script=$1
id=lk$$
id=${id:0:6}
p=gwk$id
fail() { echo "FAIL: $*"; bash "$script" --id "$id" down; exit 1; }
# A TCP connect within 1 s from host $1 to $2 (no ping on a minimal Debian: each host runs a
# listener on port 7077 instead).
ping1() {
  ip netns exec "$p-h$1" /usr/bin/python3 -c \
    "import socket,sys; socket.create_connection((sys.argv[1], 7077), timeout=1).close()" \
    "$2" 2>/dev/null
}
listeners=()
trap 'kill "${listeners[@]}" 2>/dev/null; bash "$script" --id "$id" down' EXIT
bash "$script" --id "$id" --hosts 3 --links 2,2,1 --rate 100mbit up || fail "up"
for h in 1 2 3; do
  ip netns exec "$p-h$h" /usr/bin/python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7077)); s.listen(64)
while True: s.accept()[0].close()" &
  listeners+=($!)
done
sleep 0.5
ping1 1 10.77.0.2 || fail "link 0: host 1 -> host 2"
ping1 1 10.77.1.2 || fail "link 1: host 1 -> host 2"
ping1 3 10.77.0.1 || fail "link 0: host 3 -> host 1"
ping1 3 10.77.1.1 && fail "host 3 has one link, yet reached 10.77.1.1"
[ "$(ip -n "$p-h2" -o link show | grep -c "${p}h2")" = 2 ] || fail "host 2 should have 2 links"
tc -n "$p-sw" qdisc show dev "${p}p2l1" | grep -q "tbf.*rate 100Mbit" ||
  fail "switch port of host 2 link 1 not shaped: $(tc -n "$p-sw" qdisc show dev "${p}p2l1")"
bash "$script" --id "$id" link 2 1 down || fail "link 2 1 down"
ping1 1 10.77.1.2 && fail "host 2 link 1 is down, yet carried a ping"
ping1 1 10.77.0.2 || fail "host 2 link 0 stopped with link 1"
bash "$script" --id "$id" link 2 1 up || fail "link 2 1 up"
ok=0
for _ in 1 2 3 4 5; do ping1 1 10.77.1.2 && { ok=1; break; }; sleep 0.2; done
[ $ok = 1 ] || fail "host 2 link 1 did not come back"
bash "$script" --id "$id" link 2 0 rate 10mbit || fail "link 2 0 rate"
tc -n "$p-h2" qdisc show dev "${p}h2" | grep -q "rate 10Mbit" || fail "host side not reshaped"
tc -n "$p-sw" qdisc show dev "${p}p2" | grep -q "rate 10Mbit" || fail "switch side not reshaped"
bash "$script" --id "$id" link 3 1 down 2>/dev/null && fail "host 3 has no link 1"
kill "${listeners[@]}" 2>/dev/null
wait 2>/dev/null
bash "$script" --id "$id" down
bash "$script" --id "$id" check-clean || fail "left over after down"
# {ifaces}/{ips}: what each rank is told about its host's links.
out=$(bash "$script" --id "$id" --hosts 2 --links 2,1 -- sh -c 'echo "{rank} {ifaces} {ips}"' \
  2>&1) || fail "run: $out"
echo "$out" | grep -qx "0 ${p}h1,${p}h1l1 10.77.0.1,10.77.1.1" || fail "rank 0 got: $out"
bash "$script" --id "$id" check-clean || fail "left over after a run"
echo "cluster-links: ok (3 hosts, 2/2/1 links; down, up, rate; {ifaces} {ips})"
