// gw-coll-perf: options and the two halves of the app (launch, measurement).
#pragma once

#include <cstdint>
#include <string>

#include "gw_coll.h"

namespace gw::collperf {

enum class Coll {
  kAllreduce,
  kReduceScatter,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kGather,
  kScatter,
  kAlltoallv  ///< equal parts, as OSU's osu_alltoallv: the v path's cost beside alltoall's
};

struct Options {
  uint64_t min_bytes = 8, max_bytes = 64ull << 20;
  double factor = 2;
  uint64_t step_bytes = 0;  ///< -i: add instead of multiply
  int iters = 20, warmup = 5;
  int check = 1;
  Coll coll = Coll::kAllreduce;
  ReduceOp op = ReduceOp::kSum;
  DataType dtype = DataType::kFloat32;
  Algo algo = Algo::kAuto;
  std::string transport;  ///< empty: tcp:iface=lo with --ranks, else transport.default
  int ranks = 0;          ///< 0: launched (or a single rank)
  int root = 0;           ///< broadcast, gather, scatter
  bool in_place = false;
  bool json = false;
  bool device = false;  ///< buffers in GPU memory (allreduce only)
  int64_t chunk_bytes = 0;
  int64_t rd_max_bytes = -1;
  int64_t bruck_max_bytes = -1;  ///< alltoall: Bruck up to this block size (negative: the key)
  int64_t tree_max_bytes = -1;   ///< gather/scatter: tree up to this block size (likewise)
  int timeout_ms = 60000;
  double idle_s = 0;  ///< after the sizes: no call this long (a rank computing), then a barrier
};

/// Parse argv; sets *exit_code >= 0 when the process should exit (help, bad option).
Options parse_options(int argc, char** argv, int* exit_code);
/// Run this process as one rank (launcher variables, or a world of 1). @return exit code.
int run_rank(const Options& opt);
/// Spawn opt.ranks local processes of this binary (fork/exec) and reap them. @return exit code.
int spawn_local(int argc, char** argv, const Options& opt);

const char* coll_name(Coll c);

}  // namespace gw::collperf
