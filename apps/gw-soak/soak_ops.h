/// @file soak_ops.h
/// gw-soak's operations: a schedule every rank derives from the same seed, inputs every rank can
/// compute for every other rank, and a reference computed here (not with the library's kernels):
/// small integer values, so every dtype holds inputs and results exactly (avg excepted).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gw_coll.h"

namespace gw::soak {

enum class Kind : uint8_t {
  kAllreduce,
  kBucket,
  kReduceScatter,
  kAllgather,
  kBroadcast,
  kBarrier,
  kSendRecv
};

/// One collective of the schedule (the same on every rank).
struct Op {
  Kind kind = Kind::kAllreduce;
  DataType dt = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Algo algo = Algo::kAuto;
  size_t count = 1;  ///< elements (per rank block for reduce-scatter / allgather)
  int root = 0;      ///< broadcast root; send/recv shift
  bool in_place = false;
  uint64_t salt = 0;  ///< varies the inputs per operation
};

/// Operation `i` of the schedule of `seed`, for `ranks` ranks; counts up to max_count.
Op make_op(uint64_t seed, uint64_t i, int ranks, size_t max_count);

std::string describe(const Op& o);

/// Input element `i` of `rank` for `o`, a small integer valid for o.dt and o.op.
int64_t input(const Op& o, int rank, size_t i);

/// Store small integer (or, for avg, real) `v` as o.dt at `p`; read it back as double.
void store(DataType dt, double v, void* p);
double load(DataType dt, const void* p);

/// The expected value of element `i` of the reduction over `ranks` ranks.
double reduced(const Op& o, int ranks, size_t i);

/// Whether `got` is `want` for o.dt (exact; avg of floats within the type's rounding).
bool same(const Op& o, double got, double want);

}  // namespace gw::soak
