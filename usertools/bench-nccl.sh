#!/usr/bin/env bash
# The NCCL plugin's overhead (issue 22): the harness's bandwidth and latency through
# libnccl-net-gradwire.so beside gw-perf --ranks 2 on the same transport, in one run, ROUNDS
# rounds alternating plugin and gw-perf. Both busy-poll (NCCL's proxy thread spins), both keep
# 32 requests in flight for bandwidth (NCCL_NET_MAX_REQUESTS). Prints Markdown on stdout.
#   usertools/bench-nccl.sh [ROUNDS] [TRANSPORT]    GW_BUILD_DIR (default build) must be built.
# GW_NCCL_BENCH_MIB (default 512): MiB moved per bandwidth size, by both tools.
# GW_NCCL_BENCH_BUFFERS (default 1): message buffers each side cycles, the same for both tools
# (gw-perf --buffers; 1 as perftest; 8 as NCCL's proxy, NCCL_STEPS slots per connection).
# Rounds alternate which tool runs first. Both pin rank r to CPU r (gw-perf --pin,
# GW_NCCL_BENCH_PIN=1): two busy-polling ranks sharing one core measure the scheduler.
# GW_NCCL_OLD_PLUGIN=FILE adds an older build of the plugin to every round (an A/B of the plugin
# alone: FILE is copied beside the new one, so it loads the same libgradwire).
set -euo pipefail
cd "$(dirname "$0")/.."
b=${GW_BUILD_DIR:-build}
rounds=${1:-3}
t=${2:-tcp:iface=lo}
ninja -C "$b" lib/nccl/libnccl-net-gradwire.so tests/nccl/gw-nccl-harness apps/gw-perf/gw-perf \
  >/dev/null
export GW_LOG_LEVEL=error
h=$b/tests/nccl/gw-nccl-harness plugin=$b/lib/nccl/libnccl-net-gradwire.so
perf=$b/apps/gw-perf/gw-perf
old=
mib=${GW_NCCL_BENCH_MIB:-512}
export GW_NCCL_BENCH_MIB=$mib
if [ -n "${GW_NCCL_OLD_PLUGIN:-}" ]; then
  old=$b/lib/nccl/old-libnccl-net-gradwire.so
  cp "$GW_NCCL_OLD_PLUGIN" "$old"
  trap 'rm -f "$old"' EXIT
fi
echo "## bench-nccl: $(date -u '+%F %H:%M UTC'), $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), $t"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
nb=${GW_NCCL_BENCH_BUFFERS:-1}
export GW_NCCL_BENCH_BUFFERS=$nb GW_NCCL_BENCH_PIN=1
echo "buffers per side: $nb"
plugin_runs() {
  echo "# plugin (ncclNetPlugin_v12): $h PLUGIN 12 lat|bw 2 $t"
  "$h" "$plugin" 12 lat 2 "$t" | grep -v '^PASS'
  "$h" "$plugin" 12 bw 2 "$t" | grep -v '^PASS'
  if [ -n "$old" ]; then
    echo "# old plugin ($GW_NCCL_OLD_PLUGIN): $h OLD 12 lat|bw 2 $t"
    "$h" "$old" 12 lat 2 "$t" | grep -v '^PASS'
    "$h" "$old" 12 bw 2 "$t" | grep -v '^PASS'
  fi
}
perf_runs() {
  echo "# gw-perf --ranks 2 --pin -t $t --busy (bw: --buffers $nb)"
  for s in 8 64 512 4096; do
    "$perf" --ranks 2 --pin -t "$t" --busy --test lat -s "$s" -n 2000 | grep -E "^ +$s "
  done
  for s in 65536 262144 1048576 4194304; do
    n=$(( (mib << 20) / s )); [ "$n" -lt 256 ] && n=256
    "$perf" --ranks 2 --pin -t "$t" --busy --test bw -s "$s" -n "$n" --tx-depth 32 -r 32 \
      --buffers "$nb" | grep -E "^ +[0-9]+ "
  done
}
for r in $(seq "$rounds"); do
  echo; echo "### round $r"; echo; echo '```'
  if [ $((r % 2)) = 1 ]; then plugin_runs; perf_runs; else perf_runs; plugin_runs; fi
  echo '```'
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
