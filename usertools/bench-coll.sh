#!/usr/bin/env bash
# Allreduce side by side over TCP loopback, in one run: gw-perf point-to-point (one direction
# and both at once), gw-coll-perf (ring, recursive doubling, auto), Gloo (ring-chunked and
# halving-doubling) and Open MPI (btl tcp) with the same sizes and rank counts.
# Prints Markdown on stdout. Installs libgloo-dev and Open MPI with apt-get when missing (root).
#   usertools/bench-coll.sh [quick]      GW_BUILD_DIR (default build) must be built.
# "quick" shortens the sweep (CI smoke, not for figures).
set -euo pipefail
cd "$(dirname "$0")/.."
b=${GW_BUILD_DIR:-build}
quick=${1:-}
if ! [ -e /usr/include/gloo/allreduce_ring_chunked.h ] || ! command -v mpirun >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    libgloo-dev openmpi-bin libopenmpi-dev >/dev/null
  meson setup --reconfigure "$b" >/dev/null
fi
ninja -C "$b" apps/gw-coll-perf/gw-coll-perf apps/gw-perf/gw-perf >/dev/null
# A build configured before libgloo-dev was installed keeps meson's cached "header not found"
# through --reconfigure (and --clearcache): build the baselines in a directory of their own.
base=$b
if ! ninja -C "$b" -t query apps/gw-baseline/gw-baseline-gloo >/dev/null 2>&1 ||
   ! ninja -C "$b" -t query apps/gw-baseline/gw-baseline-mpi >/dev/null 2>&1; then
  base=$b-baselines
  [ -f "$base/build.ninja" ] || meson setup "$base" >/dev/null
fi
ninja -C "$base" apps/gw-baseline/gw-baseline-gloo apps/gw-baseline/gw-baseline-mpi >/dev/null
export GW_LOG_LEVEL=error
perf=$b/apps/gw-perf/gw-perf coll=$b/apps/gw-coll-perf/gw-coll-perf
gloo=$base/apps/gw-baseline/gw-baseline-gloo mpi=$base/apps/gw-baseline/gw-baseline-mpi
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none
        --mca btl tcp,self --mca btl_tcp_if_include lo --mca pml ob1)
small=(-b 4K -e 4M -f 4 -n 50 -w 5) large=(-b 16M -e 256M -f 4 -n 5 -w 1)
if [ "$quick" = quick ]; then small=(-b 4K -e 64K -f 16 -n 3 -w 1); large=(-b 1M -e 1M -n 2 -w 1); fi

section() { printf '\n### %s\n\n```\n' "$*"; }
endsec() { printf '```\n'; }
echo "## bench-coll: $(date -u '+%F %H:%M UTC'), $(nproc) cores, commit $(git rev-parse --short HEAD)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
section "point to point: gw-perf --ranks 2 (one direction, both directions, latency)"
"$perf" --ranks 2 -s 32M -n 16 | grep -E '^ *[0-9]'
"$perf" --ranks 2 -b -s 32M -n 16 | grep -E '^ *[0-9]'
"$perf" --ranks 2 --test lat -s 4K -n 2000 | grep -E '^ *[0-9]'
endsec
for n in 2 4; do
  for a in rd ring; do
    section "gw-coll-perf --ranks $n --algo $a ${small[*]} -c 1"
    "$coll" --ranks "$n" --algo "$a" "${small[@]}" -c 1 | grep -v '^# gw'
    endsec
  done
  chunks=(65536 262144 1048576 4194304); [ "$quick" = quick ] && chunks=(1048576)
  section "gw-coll-perf --ranks $n -b 64M -e 64M --chunk C (chunk-size sweep, ring)"
  for c in "${chunks[@]}"; do
    "$coll" --ranks "$n" --algo ring -b 64M -e 64M -n 5 -w 1 --chunk "$c" | grep -v '^#' |
      sed "s/\$/  chunk $c/"
  done
  endsec
  section "gw-coll-perf --ranks $n ${large[*]} -c 1"
  "$coll" --ranks "$n" "${large[@]}" -c 1 | grep -v '^# gw'
  endsec
  for a in ring-chunked hd; do
    section "gw-baseline-gloo --ranks $n --algo $a (small and large)"
    "$gloo" --ranks "$n" --algo "$a" "${small[@]}"
    "$gloo" --ranks "$n" --algo "$a" "${large[@]}" | grep -v '^#'
    endsec
  done
  section "mpirun -np $n gw-baseline-mpi (Open MPI, btl tcp)"
  "${mpirun[@]}" -np "$n" "$mpi" "${small[@]}"
  "${mpirun[@]}" -np "$n" "$mpi" "${large[@]}" | grep -v '^#'
  endsec
done

# CPU time per operation (all ranks together), by differencing a long and a short run under
# `perf stat`: robust on a shared machine where wall-clock figures are not. On 2 cores a job
# that needs C ms of CPU cannot finish in under C/2 ms of wall time.
if command -v perf >/dev/null; then
  # task-clock, and its user and kernel parts (ms) of one run
  cpu_ms() {
    perf stat -x, -e task-clock,user_time,system_time -- "$@" 2>&1 >/dev/null |
      awk -F, '/task-clock/{t=$1} /user_time/{u=$1/1e6} /system_time/{s=$1/1e6} END{print t, u, s}'
  }
  per_op() {  # per_op LONG SHORT CMD... (CMD takes the iteration count last)
    local long=$1 short=$2; shift 2
    local a b; a=$(cpu_ms "$@" "$long"); b=$(cpu_ms "$@" "$short")
    awk -v a="$a" -v b="$b" -v n=$((long - short)) 'BEGIN{split(a, x, " "); split(b, y, " ");
      printf "%.0f us (user %.0f, kernel %.0f)\n", 1000*(x[1]-y[1])/n, 1000*(x[2]-y[2])/n,
             1000*(x[3]-y[3])/n}'
  }
  section "CPU per operation, all ranks (perf stat task-clock, long run minus short run)"
  echo "gw-perf -b 32 MiB each way:        $(per_op 22 2 "$perf" --ranks 2 -b -s 32M -n)"
  echo "allreduce 64 MiB, 2 ranks, ring:   $(per_op 12 2 "$coll" --ranks 2 -b 64M -e 64M -w 1 -c 0 -n)"
  echo "allreduce 64 MiB, 4 ranks, ring:   $(per_op 12 2 "$coll" --ranks 4 -b 64M -e 64M -w 1 -c 0 -n)"
  echo "  Gloo ring-chunked, same:          $(per_op 12 2 "$gloo" --ranks 4 --algo ring-chunked -b 64M -e 64M -w 1 -n)"
  echo "allreduce 4 KiB, 4 ranks:          $(per_op 4000 400 "$coll" --ranks 4 -b 4K -e 4K -w 10 -c 0 -n)"
  echo "  same, transport.spin_us=0:        $(GW_TRANSPORT_SPIN_US=0 per_op 4000 400 "$coll" --ranks 4 -b 4K -e 4K -w 10 -c 0 -n)"
  echo "  Open MPI, same:                   $(per_op 4000 400 "${mpirun[@]}" -np 4 "$mpi" -b 4K -e 4K -w 10 -n)"
  endsec
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
