#!/usr/bin/env bash
# User-space instructions of the 2-byte latency path, gradwire against perftest, counted by
# callgrind inside the soft-RoCE VM (docs/bench-rdma.md, "The scripts"):
#   usertools/gw-rxe-vm.sh --timeout 900 -- tests/rdma/callgrind_in_vm.sh [BUILD_DIR] [SIZE]
# Prints, per process, the inclusive instruction counts and call counts of the data-path
# functions (divide by the iterations, 1000 plus gw-perf's warm-up, for a per-message cost).
set -u
build=${1:-build}
size=${2:-2}
out=/var/tmp/gw-cg
mkdir -p $out && rm -f $out/cg.*
export TMPDIR=/var/tmp  # valgrind's own files; the guest's /tmp is a 9p share
vg() { valgrind --vgdb=no --tool=callgrind "$@"; }
vg --trace-children=yes --callgrind-out-file=$out/cg.gw.%p \
  "$build/apps/gw-perf/gw-perf" --ranks 2 -t rdma:dev=rxe0 --test lat --busy -s "$size" -n 1000 \
  2>&1 | grep -E '^ [0-9]'
vg --callgrind-out-file=$out/cg.ib_server ib_send_lat -d rxe0 -x 1 -s "$size" -n 1000 \
  >/dev/null 2>&1 &
sleep 8
vg --callgrind-out-file=$out/cg.ib_client ib_send_lat -d rxe0 -x 1 -s "$size" -n 1000 \
  10.99.0.1 2>&1 | grep -E '^ *[0-9]+ +[0-9]+'
wait
hot='post_send|post_recv|send_now|handle_wc|on_recv|deliver_eager|progress\(|flush\(|pump\(|'
hot+='CompletionQueue::wait|Client::lat|Session::fill|librxe|ib_send_lat\]'
for f in $out/cg.*; do
  grep -q "Client::lat\|run_server\|ib_send_lat" "$f" || continue  # gw-perf's launcher
  echo "== $f"
  callgrind_annotate --tree=calling --inclusive=yes "$f" 2>/dev/null |
    awk -v hot="$hot" '/^ *[0-9,]+ .*\*  /{show=0} $0 ~ "\\* .*(" hot ")" {show=1} show' |
    sed 's/ \[\/.*\]//; s/std::span<[^>]*>/span/g; s|[^ ]*/\.\./||' | cut -c1-150 |
    grep -v '^$' | head -60
done
