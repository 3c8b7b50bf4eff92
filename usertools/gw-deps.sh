#!/usr/bin/env bash
# Install gradwire's build and test dependencies from Debian 12 packages (idempotent).
set -euo pipefail
pkgs=(dpdk dpdk-dev libdpdk-dev meson ninja-build pkg-config gcc g++ python3 libspdlog-dev libtomlplusplus-dev libcli11-dev
      nlohmann-json3-dev  # gw-doctor reads the flight records (JSON)
      libssl-dev  # libcrypto: HMAC-SHA256 of authenticated peers (GW_AUTH_KEY)
      libgtest-dev libgmock-dev libhwy-dev libbenchmark-dev iproute2 libibverbs-dev rdma-core
      python3-torch libtorch-dev pybind11-dev python3-pytest  # the PyTorch backend
      linux-perf chromium iperf3 sockperf  # gw-compare (counters, report test, references)
      ucx-utils libfabric-bin  # gw-compare's UCX (ucx_perftest) and libfabric (fi_pingpong) peers
      libopenmpi-dev openmpi-bin libgloo-dev  # apps/gw-baseline: gw-compare's Open MPI, Gloo peers
      iperf  # usertools/bench-tcp-footprint.sh: iperf 2 writes 8 MiB blocks, iperf3 at most 1 MiB
      clang libclang-rt-14-dev  # usertools/gw-fuzz.sh: clang 14 and its libFuzzer runtime
      libbpf-dev linux-libc-dev  # drivers/dpdk/gw_xdp.c, the XDP program of net_af_xdp (clang -target bpf)
      clang-format)  # the unit suite's 'format' test (usertools/gw-format.sh --check)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gw-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
