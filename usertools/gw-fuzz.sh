#!/usr/bin/env bash
# Build the libFuzzer targets (tests/fuzz, clang, ASan+UBSan) into build-fuzz and run each for a
# bounded time. Fails if any target crashes, leaks, times out or trips a sanitizer.
# Usage: usertools/gw-fuzz.sh [-B] [-t SECONDS] [-f SECONDS] [-n RUNS] [-o RESULTS.json] [TARGET...]
#   -B  set up and build only (gw-asan.sh builds its tests in the same ASan+UBSan build)
#   -t  seconds per target (default 60; -max_total_time)
#   -f  seconds per pure target (no socket or thread per input, 10^4-10^5 exec/s; default -t)
#   -n  executions per target (libFuzzer -runs; default: no limit, the time decides)
#   -o  append one meson-style JSON record per target here (for gw-test-summary.py)
# TARGET: fuzz_address, fuzz_tcp_frames, ... (default: every target built).
# New inputs go to build-fuzz/fuzz-corpus/TARGET, crashes to build-fuzz/fuzz-artifacts/TARGET;
# the seeds in tests/fuzz/corpus/TARGET are only read. Logs: build-fuzz/fuzz-logs/TARGET.log.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=60 fast="" runs=-1 out="" build_only=0
# Targets that call the library's parsers directly: a few seconds is already ~10^5 inputs.
pure="fuzz_address fuzz_rdma_msgs fuzz_store_core fuzz_store_client_core fuzz_ps_table"
pure+=" fuzz_tcp_frames_core"
pure+=" fuzz_coll_desc_core fuzz_ps_msgs_core fuzz_dpdk_frames_core"
while getopts "Bt:f:n:o:" o; do
  case $o in
    B) build_only=1 ;;
    t) secs=$OPTARG ;;
    f) fast=$OPTARG ;;
    n) runs=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
dir=${GW_FUZZ_BUILD_DIR:-build-fuzz}
record() {  # name result
  [ -n "$out" ] && printf '{"name": "%s", "result": "%s"}\n' "$1" "$2" >> "$out"
  return 0
}
fuzzer_rt="/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a"
if ! command -v clang++ >/dev/null || ! compgen -G "$fuzzer_rt" >/dev/null; then
  echo "gw-fuzz: clang and libclang_rt.fuzzer are needed (usertools/gw-deps.sh installs them)"
  record fuzz-build FAIL
  exit 1
fi
if [ ! -f "$dir/build.ninja" ]; then
  # -O1 and line tables only: clang with ASan+UBSan at -O2 -g compiles ~3x slower on 2 cores,
  # and libFuzzer's own guidance is -O1 for fuzzing builds. Unity: half the CPU (gw-build.sh).
  CC=clang CXX=clang++ meson setup "$dir" -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbuildtype=plain -Doptimization=1 -Dcpp_args=-gline-tables-only \
    -Dc_args=-gline-tables-only -Dunity="${GW_UNITY:-on}" -Dunity_size=8 >/dev/null ||
    { record fuzz-build FAIL; exit 1; }
fi
all=$(cd tests/fuzz && ls fuzz_*.cc | sed 's/\.cc$//')
[ -d /usr/include/dpdk ] || all=$(echo "$all" | grep -v dpdk)
targets=${*:-$all}
# shellcheck disable=SC2086
ninja -C "$dir" -j "${GW_JOBS:-$(nproc)}" $(printf 'tests/fuzz/%s ' $targets) ||
  { record fuzz-build FAIL; exit 1; }
[ "$build_only" = 1 ] && exit 0
mkdir -p "$dir/fuzz-logs"
failed=0
printf '%-20s %12s %10s %s\n' target executions exec/s result
for t in $targets; do
  mkdir -p "$dir/fuzz-corpus/$t" "$dir/fuzz-artifacts/$t"
  log="$dir/fuzz-logs/$t.log"
  # -timeout: one input may take 10 s (a store request waits its 2 s I/O timeout at most);
  # -rss_limit_mb: libFuzzer's default, stated; leaks are reported at exit (ASan's default).
  # fuzz_coll_desc: every input keeps memory on purpose (a destroyed communicator parks the
  # notices its receives still point at), so libFuzzer's per-input leak check would run each
  # input twice plus an LSan scan (half its rate); the check at exit stays.
  leaks=1
  [ "$t" = fuzz_coll_desc ] && leaks=0
  t_secs=$secs
  [ -n "$fast" ] && [[ " $pure " == *" $t "* ]] && t_secs=$fast
  "$dir/tests/fuzz/$t" -max_total_time="$t_secs" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
    -detect_leaks=$leaks \
    -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/$t/" \
    "$dir/fuzz-corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  reports='ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:'
  if [ $rc -eq 0 ] && ! grep -qE "$reports" "$log"; then
    res=OK
  else
    res=FAIL
    failed=$((failed + 1))
    grep -m1 -E 'ERROR:|runtime error:|==[0-9]+==' "$log" | sed "s|^|  $t: |"
    echo "  log: $log; reproducer: $(ls "$dir/fuzz-artifacts/$t" | head -1)"
  fi
  printf '%-20s %12s %10s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$res"
  record "fuzz-$t" "$res"
done
[ $failed -eq 0 ]
