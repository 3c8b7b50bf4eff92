#!/usr/bin/env bash
# gw-perf tcp bandwidth beside iperf3 -l 1M, pinned as bench-tcp.sh (server CPU 0, client CPU 1):
# 1 MiB and 8 MiB messages with 1 and 128 in flight (buffer footprint 1x..128x the message)
# against iperf3 cycling one 1 MiB buffer (issue 20, 8 MiB row), and iperf (2) writing and reading
# 1 MiB and 8 MiB blocks: iperf3 takes at most 1 MiB, iperf2 has the footprint of gw-perf's
# 8 MiB row. GW_BUILD_DIR: build.
cd "$(dirname "$0")/.."
export GW_LOG_LEVEL=error
p=32000
gw() {  # size depth
  p=$((p+1))
  timeout 60 taskset -c 0 ${GW_BUILD_DIR:-build}/apps/gw-perf/gw-perf -t tcp:iface=lo -p $p --test bw -s $1 -D 4 --tx-depth $2 -r $(( $2 < 4 ? 4 : $2 )) >/dev/null 2>&1 &
  sleep 0.3
  timeout 60 taskset -c 1 ${GW_BUILD_DIR:-build}/apps/gw-perf/gw-perf -t tcp:iface=lo -p $p --test bw -s $1 -D 4 --tx-depth $2 -r $(( $2 < 4 ? 4 : $2 )) --json 127.0.0.1 | sed -n 's/.*"bw_avg_MBps":\([0-9.]*\).*/\1/p' | awk '{printf "%.1f Gbit/s\n", $1*1048576*8/1e9}'
  wait
}
ip3() {
  p=$((p+1))
  timeout 30 taskset -c 0 iperf3 -s -1 -p $p >/dev/null 2>&1 &
  sleep 0.3
  timeout 30 taskset -c 1 iperf3 -c 127.0.0.1 -p $p -l $1 -t 4 -f g | awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i-1), "Gbit/s" }'
  wait
}
ip2() {  # iperf 2: -l sets the block of the client's writes and of the server's reads
  p=$((p+1))
  timeout 30 taskset -c 0 iperf -s -p $p -l $1 >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  timeout 30 taskset -c 1 iperf -c 127.0.0.1 -p $p -l $1 -t 4 -f g | awk '/Gbits\/sec/ { for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i-1), "Gbit/s" }'
  kill $spid 2>/dev/null; wait
}
command -v iperf >/dev/null || { echo "bench-tcp-footprint: apt-get install iperf (iperf 2)" >&2; exit 1; }
for r in 1 2 3; do
  echo "round $r"
  echo -n " iperf3 -l 1M:            "; ip3 1M
  echo -n " gw-perf 1 MiB depth 1:   "; gw 1M 1
  echo -n " gw-perf 1 MiB depth 128: "; gw 1M 128
  echo -n " gw-perf 8 MiB depth 1:   "; gw 8M 1
  echo -n " gw-perf 8 MiB depth 128: "; gw 8M 128
  echo -n " iperf -l 1M:             "; ip2 1M
  echo -n " iperf -l 8M:             "; ip2 8M
done
