#!/usr/bin/env bash
# meson test 'rdma-perf-options' (host, no device needed): gw-perf's perftest options
# -d/-x/-q become rdma device arguments (seen through --print-config), imply -t rdma, and are
# refused, with exit code 2, for another transport or when the spec already sets the key.
set -u
perf=$1
fail() { echo "FAIL: $*"; exit 1; }
out=$("$perf" -d rxe0 -x 1 -q 2 --print-config) || fail "--print-config exited $?"
grep -q '^dev = "rxe0"' <<<"$out" || fail "-d rxe0 not applied: $(grep '^dev' <<<"$out")"
grep -q '^gid_index = 1 ' <<<"$out" || fail "-x 1 not applied"
grep -q '^qps_per_conn = 2 ' <<<"$out" || fail "-q 2 not applied"
out=$("$perf" -t rdma:eager_bytes=4096 --ib-dev=mlx5_0 --qp 4 --print-config) ||
  fail "long options exited $?"
grep -q '^dev = "mlx5_0"' <<<"$out" && grep -q '^eager_bytes = 4096 ' <<<"$out" &&
  grep -q '^qps_per_conn = 4 ' <<<"$out" || fail "long options not merged into the spec"
"$perf" -t tcp -d rxe0 --print-config >/dev/null 2>&1
[ $? = 2 ] || fail "-d with -t tcp must exit 2"
"$perf" -t rdma:dev=rxe0 -d rxe0 --print-config >/dev/null 2>&1
[ $? = 2 ] || fail "dev= twice must exit 2"
"$perf" -q 9 --print-config >/dev/null 2>&1
[ $? != 0 ] || fail "-q 9 (more than 8 queue pairs) must be refused"
echo "gw-perf rdma options: ok"
