// Shared by the Gloo and MPI baselines: options, inputs with one exact answer, the check and
// gw-coll-perf's table, so the three programs print comparable rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gwb {

struct Options {
  uint64_t min_bytes = 4096, max_bytes = 64 << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  int ranks = 2;                   // gloo: processes to fork
  std::string algo;                // gloo: ring | ring-chunked | hd
  std::string coll = "allreduce";  // mpi: allreduce | alltoall
};

/// Parses -b -e -f -n -w (and --ranks N, --algo A, --coll C); exits with a message on bad input.
Options parse(int argc, char** argv, const char* usage);

/// Sizes of the sweep, in bytes, multiples of 4 (float32).
std::vector<uint64_t> sizes(const Options& o);

/// Rank r's input: small integers, so the float32 sum over ranks is exact.
void fill(std::vector<float>& v, size_t count, int rank);

/// Elements that differ from the exact sum over `n` ranks.
long long count_wrong(const std::vector<float>& v, size_t count, int n);

/// Alltoall: element j of rank p's send buffer (exact in float32 for p < 2000).
float a2a_value(int p, size_t j);

/// Elements of rank `me`'s alltoall result (blocks of `block` from each of `n` ranks) that
/// differ from what their senders sent.
long long a2a_wrong(const std::vector<float>& v, size_t block, int n, int me);

/// gw-coll-perf's columns; `coll` "allreduce" (float32 sum) or "alltoall" (redop none, busbw
/// (n-1)/n of algbw as nccl-tests and gw-coll-perf count it).
void print_header(const char* who, const char* coll = "allreduce");
void print_row(uint64_t bytes, double us, int n, long long wrong, const std::string& algo,
               const char* coll = "allreduce");

}  // namespace gwb
