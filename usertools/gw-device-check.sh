#!/usr/bin/env bash
# The checks of a lent GPU machine in one run (issue 45). Prepared here; nothing on that machine
# can be fetched, and it has no meson, so the binaries are built here and carried:
#
#   usertools/gw-device-check.sh --pack [BUILD]    # here: BUILD's (default build) binaries and
#                                                  # libraries into .devpack/ (ignored by git)
#   device run: bash usertools/gw-device-check.sh  # carry [".devpack"], timeout_s 540
#
# On the device it writes under $OUT (the tool brings back 8 files at most): env.txt,
# test_cuda.txt, cuda_bench.txt, coll_device.txt, nccl.jsonl (one line per op and size, both
# nets), nccl_logs.txt (NCCL_DEBUG=INFO of every rank, cut at 4 MiB), summary.md (one table:
# each step, its result, its time). Each step has its own time limit so the whole
# stays within 8 minutes; a step that fails or times out is reported and the next one runs.
# Not yet covered: the torch 2.x ProcessGroup backend with CUDA tensors (item 3): the backend
# is built against Debian's torch 1.13 and needs porting to torch 2.x's c10d Backend first.
set -uo pipefail
cd "$(dirname "$0")/.."
pack=.devpack

if [ "${1:-}" = --pack ]; then
  build=${2:-build}
  for f in tests/cuda/test_cuda apps/gw-cuda-bench/gw-cuda-bench apps/gw-coll-perf/gw-coll-perf \
           libgradwire.so.0 lib/nccl/libnccl-net-gradwire.so; do
    [ -e "$build/$f" ] || { echo "gw-device-check: $build/$f missing: build with nvcc first"; exit 1; }
  done
  rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
  cp "$build"/tests/cuda/test_cuda "$build"/apps/gw-cuda-bench/gw-cuda-bench \
    "$build"/apps/gw-coll-perf/gw-coll-perf "$pack/bin/"
  cp -L "$build"/libgradwire.so.0 "$pack/lib/"
  cp -L "$build"/lib/nccl/libnccl-net-gradwire.so "$pack/lib/"
  # Debian's shared libraries the binaries need and a bare CUDA image may lack.
  for lib in $(ldd "$pack"/bin/* "$pack"/lib/* | awk '/=> \// {print $3}' | sort -u); do
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s*|libstdc++*) ;;
      libcuda.so*|libnvidia*) ;;  # the device's own driver
      *) cp -L "$lib" "$pack/lib/" ;;
    esac
  done
  strip --strip-debug "$pack"/bin/* "$pack"/lib/*  # the carry limit is 64 MiB
  grep -qx "/$pack/" .git/info/exclude 2>/dev/null || echo "/$pack/" >> .git/info/exclude
  du -sh "$pack"
  exit 0
fi

out=${OUT:-/tmp/gw-device-check}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GW_LOG_LEVEL=warn
summary="$out/summary.md"
printf '| step | result | seconds |\n|---|---|---:|\n' > "$summary"

# step NAME LIMIT_S LOG CMD...: runs CMD with a time limit, its output to LOG, a summary row.
step() {
  local name=$1 limit=$2 log=$3; shift 3
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" > "$out/$log" 2>&1
  rc=$?
  local res="ok"
  [ $rc -eq 0 ] || res="FAILED (exit $rc$([ $rc -eq 124 ] && echo ", over ${limit} s"))"
  printf '| %s | %s | %d |\n' "$name" "$res" $((SECONDS - t0)) >> "$summary"
  echo "== $name: $res ($((SECONDS - t0)) s)"
}

{
  date -u; nproc; nvidia-smi -L
  python3 -c 'import sys, torch; print(sys.version); print("torch", torch.__version__,
"cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} > "$out/env.txt" 2>&1
[ -x "$pack/bin/test_cuda" ] || { echo "no $pack/: run --pack here and carry it" | tee -a "$summary"; exit 1; }
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU here (nvidia-smi -L)" | tee -a "$summary"; exit 1; }

step "test_cuda (kernels, staging, device collectives)" 150 test_cuda.txt "$pack/bin/test_cuda"
step "gw-cuda-bench (copies, kernels, device allreduce)" 90 cuda_bench.txt "$pack/bin/gw-cuda-bench"
step "gw-coll-perf --device, 2 ranks tcp, 8 B..64 MiB" 90 coll_device.txt \
  "$pack/bin/gw-coll-perf" --ranks 2 --device -b 8 -e 64M -f 8 -n 20 -w 5
# NCCL through gradwire's plugin (tcp on lo), then NCCL's own Socket transport beside it.
logs=/tmp/gw-nccl-logs && rm -rf "$logs" && mkdir -p "$logs"
NCCL_NET_PLUGIN="$PWD/$pack/lib/libnccl-net-gradwire.so" GW_NCCL_TRANSPORT="tcp:iface=lo" \
  NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$logs/gradwire.%h.%p.log" \
  step "NCCL over gradwire's net plugin (torch, 2 ranks, 1 GPU)" 150 nccl_gradwire.jsonl \
  python3 usertools/gw_nccl_torch.py --net gradwire
NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$logs/socket.%h.%p.log" \
  step "NCCL over its Socket transport (the same run)" 150 nccl_socket.jsonl \
  python3 usertools/gw_nccl_torch.py --net Socket
# Did NCCL use gradwire's net? Its INFO log names the plugin it loaded and the net it uses.
used=$(cat "$logs"/gradwire.* 2>/dev/null | grep -m1 -o 'Using network [^ ]*' || true)
loaded=$(cat "$logs"/gradwire.* 2>/dev/null | grep -m1 -io 'net/plugin[^\n]*gradwire[^ ]*' || true)
printf '| NCCL log: plugin loaded / net used | %s / %s | 0 |\n' "${loaded:-NOT FOUND}" \
  "${used:-NOT FOUND}" >> "$summary"
cat "$out"/nccl_gradwire.jsonl "$out"/nccl_socket.jsonl > "$out/nccl.jsonl" 2>/dev/null
rm -f "$out"/nccl_gradwire.jsonl "$out"/nccl_socket.jsonl
for f in "$logs"/*; do echo "==> $(basename "$f")"; cat "$f"; done | head -c 4M > "$out/nccl_logs.txt"
cat "$summary"
