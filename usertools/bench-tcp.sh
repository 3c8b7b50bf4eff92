#!/usr/bin/env bash
# gw-perf over TCP loopback beside iperf3 (bandwidth) and sockperf (ping-pong latency), back to
# back in one run, same placement for every tool: server on CPU 0, client on CPU 1.
# Prints a Markdown report on stdout; raw tool output goes to $GW_BENCH_LOG (default
# bench-tcp.log). Usage: usertools/bench-tcp.sh [seconds per point, default 5]
#   GW_BUILD_DIR (default build) must hold a built apps/gw-perf/gw-perf.
#   GW_BENCH_NICE: nice level for every benchmark process (default 0).
#   GW_BENCH_BUSY_ROUNDS=N: only the busy ping-pong rows, N interleaved rounds (see below).
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
perf=${GW_BUILD_DIR:-build}/apps/gw-perf/gw-perf
log=${GW_BENCH_LOG:-bench-tcp.log}
sizes=(64 4096 65536 1048576 8388608)
port=$((20000 + RANDOM % 20000))
for tool in "$perf" iperf3 sockperf taskset awk; do
  command -v "$tool" >/dev/null || { echo "bench-tcp: $tool not found (apt-get install iperf3 sockperf; build gradwire first)" >&2; exit 1; }
done
if [ "$(nproc)" -ge 2 ]; then srv="taskset -c 0"; cli="taskset -c 1"; else srv=""; cli=""; fi
# On a shared machine, GW_BENCH_NICE=-19 (root) gives every tool the same head start over
# other work; the report records it.
nice_level=${GW_BENCH_NICE:-0}
if [ "$nice_level" != 0 ]; then srv="nice -n $nice_level $srv"; cli="nice -n $nice_level $cli"; fi
export GW_LOG_LEVEL=${GW_LOG_LEVEL:-error}
: >"$log"

next_port() { port=$((port + 1)); }
# run NAME CMD...: command output appended to the log, echoed to stdout for parsing.
run() { { echo "### $*"; } >>"$log"; "$@" 2>&1 | tee -a "$log"; }

# Each measurement sets R (not $(...): the port counter must advance in this shell).
# gw-perf as two processes (the same placement as the other tools); R = its JSON line.
gwperf() {  # gwperf SPEC ARGS...
  local spec=$1; shift
  next_port
  $srv "$perf" -t "$spec" -p "$port" "$@" >>"$log" 2>&1 &
  local spid=$!
  R=$(run $cli "$perf" -t "$spec" -p "$port" --json "$@" 127.0.0.1 | grep '^{')
  wait "$spid"
}
json() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" | head -1; }

iperf_gbps() {  # iperf_gbps SIZE -> Gbit/s received (iperf3 takes at most 1 MiB per write)
  local len=$(( $1 > 1048576 ? 1048576 : $1 ))
  next_port
  $srv iperf3 -s -1 -p "$port" >>"$log" 2>&1 &
  local spid=$!
  sleep 0.3
  R=$(run $cli iperf3 -c 127.0.0.1 -p "$port" -l "$len" -t "$secs" -f g |
    awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i-1) }')
  wait "$spid"
}

sockperf_lat() {  # sockperf_lat SIZE [--nonblocked] -> "median avg p99" one-way usec
  local size=$1; shift
  next_port
  $srv sockperf sr --tcp -i 127.0.0.1 -p "$port" "$@" >>"$log" 2>&1 &
  local spid=$!
  sleep 0.5
  R=$(run $cli sockperf pp --tcp -i 127.0.0.1 -p "$port" -m "$size" -t "$secs" "$@" |
    sed 's/\x1b\[[0-9;]*m//g' | awk '
      /avg-latency=/ { sub(/.*avg-latency=/, ""); sub(/ .*/, ""); avg = $0 }
      /percentile 50.000/ { med = $NF }
      /percentile 99.000/ { p99 = $NF }
      END { print med, avg, p99 }')
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }

# GW_BENCH_BUSY_ROUNDS=N: only the busy ping-pong rows (64 B, 64 KiB), N rounds, the two tools
# alternating which goes first, one ratio per round (the machine's state swings between runs).
if [ -n "${GW_BENCH_BUSY_ROUNDS:-}" ]; then
  echo "# busy ping-pong, $GW_BENCH_BUSY_ROUNDS rounds: sockperf --nonblocked vs gw-perf --busy"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg); $secs s per point"
  echo
  echo "| round | size | sockperf median µs | gw-perf median µs | ratio |"
  echo "|---:|---:|---:|---:|---:|"
  for ((r = 1; r <= GW_BENCH_BUSY_ROUNDS; r++)); do
    for s in 64 65536; do
      for first in $((r % 2)) $(((r + 1) % 2)); do
        if [ "$first" = 1 ]; then
          sockperf_lat "$(( s > 65507 ? 65507 : s ))" --nonblocked; read -r smed _ _ <<<"$R"
        else
          gwperf tcp:iface=lo --test lat -s "$s" -D "$secs" --busy; gmed=$(json t_typical_us <<<"$R")
        fi
      done
      echo "| $r | $s | $smed | ${gmed:-fail} | $(ratio "$gmed" "$smed") |"
    done
  done
  echo
  echo "- load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

echo "# gradwire TCP loopback: gw-perf vs iperf3 / sockperf"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -srm); $(nproc) CPU(s): $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (figures are only comparable on a quiet machine)"
echo "- $secs s per point; server run under \`${srv:-no pinning}\`, client under \`${cli:-no pinning}\`; gw-perf from $perf"
echo
echo "## Bandwidth (Gbit/s, 10^9 bit/s; blocking waits; gw-perf unidirectional, tx-depth 128)"
echo
echo "| size | iperf3 (1 stream) | gw-perf tcp streams=1 | ratio | gw-perf tcp streams=4 | ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
for s in "${sizes[@]}"; do
  iperf_gbps "$s"; ip=$R
  gwperf tcp:iface=lo,streams=1 -s "$s" -D "$secs"; g1=$(json bw_avg_Gbps <<<"$R")
  gwperf tcp:iface=lo,streams=4 -s "$s" -D "$secs"; g4=$(json bw_avg_Gbps <<<"$R")
  note=""; [ "$s" -gt 1048576 ] && note=" (iperf3 -l 1M)"
  echo "| $s | ${ip:-fail}$note | ${g1:-fail} | $(ratio "$g1" "$ip") | ${g4:-fail} | $(ratio "$g4" "$ip") |"
done
echo
echo "## Ping-pong latency (one way = half round trip, usec; median / average / 99%)"
echo
echo "sockperf takes at most 65507-byte messages: its 64 KiB point uses 65507 B, and it has none"
echo "for 1 MiB and 8 MiB."
echo
echo "Modes: sleep = sockperf default (blocking recv) vs gw-perf with transport.spin_us=0 (sleeps"
echo "on the epoll fd at once); default = the same sockperf figure vs gw-perf's default wait (spins"
echo "20 us, then sleeps); busy = sockperf --nonblocked vs gw-perf --busy, on both sides."
echo
echo "| size | mode | sockperf med/avg/p99 | gw-perf med/avg/p99 | ratio (median) |"
echo "|---:|---|---:|---:|---:|"
for s in "${sizes[@]}"; do
  # sleep: gw-perf sleeps on the epoll fd at once (transport.spin_us=0), as sockperf's
  # blocking recv() does; default: gw-perf spins 20 us first; busy: both spin throughout.
  modes="sleep default busy"
  # Busy-polling both cores at >= 1 MiB starves the kernel's softirq work (ksoftirqd) and
  # measures that, not the transport; sockperf has no point there either.
  [ "$s" -gt 65536 ] && modes="sleep default"
  for mode in $modes; do
    sp_flag=; gw_flag=; spin=20
    [ "$mode" = sleep ] && spin=0
    [ "$mode" = busy ] && { sp_flag=--nonblocked; gw_flag=--busy; }
    sp="n/a n/a n/a"
    if [ "$s" -le 65536 ] && [ "$mode" != default ]; then
      sockperf_lat "$(( s > 65507 ? 65507 : s ))" $sp_flag; sp=$R
    elif [ "$s" -le 65536 ]; then
      sp=$sp_sleep  # sockperf has one blocking mode: the row above measured it
    fi
    [ "$mode" = sleep ] && sp_sleep=$sp
    GW_TRANSPORT_SPIN_US=$spin gwperf tcp:iface=lo --test lat -s "$s" -D "$secs" $gw_flag
    gmed=$(json t_typical_us <<<"$R")
    gavg=$(json t_avg_us <<<"$R")
    gp99=$(json p99_us <<<"$R")
    read -r smed savg sp99 <<<"$sp"
    echo "| $s | $mode | $smed / $savg / $sp99 | ${gmed:-fail} / ${gavg:-fail} / ${gp99:-fail} | $(ratio "$gmed" "$smed") |"
  done
done
echo
echo "Raw output of every command: $log"
