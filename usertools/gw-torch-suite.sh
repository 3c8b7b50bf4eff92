#!/usr/bin/env bash
# PyTorch's own DistributedTest suite (~280 tests) on backend gradwire and on gloo, side by
# side, at each world size given (default 2 3 4), over tcp loopback; prints the table
# (tests/torch/suite_table.py) and exits 1 when a test that passes on gloo fails on gradwire.
# Long: about 20 minutes per backend and world size on a 2-core machine.
#   usertools/gw-torch-suite.sh [-o DIR] [-k PATTERN] [WORLD_SIZE...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/gw-torch-suite.XXXXXX)
pat=()
while getopts "o:k:" o; do
  case $o in
    o) out=$OPTARG; mkdir -p "$out" ;;
    k) pat+=(-k "$OPTARG") ;;
    *) sed -n 2,6p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
sizes=("${@:-2 3 4}")
dir=${GW_BUILD_DIR:-build}
[ -e "$dir/python/gradwire/__init__.py" ] || { echo "build the tree first (usertools/gw-build.sh)"; exit 2; }
export PYTHONPATH=$PWD/$dir/python GW_LOG_LEVEL=error OMP_NUM_THREADS=1
export GW_TRANSPORT=${GW_TRANSPORT:-tcp:iface=lo}
for ws in ${sizes[*]}; do
  for b in gloo gradwire; do
    t0=$(date +%s)
    BACKEND=$b WORLD_SIZE=$ws GW_SUITE_JSON="$out/$b-$ws.json" \
      /usr/bin/python3 tests/torch/dist_suite.py "${pat[@]}" >"$out/$b-$ws.log" 2>&1 || true
    echo "$b, WORLD_SIZE $ws: $(($(date +%s) - t0)) s (log: $out/$b-$ws.log)"
  done
done
/usr/bin/python3 tests/torch/suite_table.py "$out" | tee "$out/table.md"
