// gw-soak's schedule, inputs and reference (see soak_ops.h).
#include "soak_ops.h"

#include <cmath>
#include <cstring>

namespace gw::soak {
namespace {

bool is_int(DataType dt) {
  return dt == DataType::kInt32 || dt == DataType::kInt64 || dt == DataType::kUInt8;
}

uint64_t mix(uint64_t x) {  // splitmix64: a different, well-spread value per (op, rank, i)
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint16_t to_bf16(float f) {  // round to nearest even (the values here are never NaN)
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

float from_bf16(uint16_t h) {
  uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace

Op make_op(uint64_t seed, uint64_t i, int ranks, size_t max_count) {
  std::mt19937_64 rng(mix(seed ^ mix(i)));
  Op o;
  const int k = static_cast<int>(rng() % 100);
  o.kind = k < 35   ? Kind::kAllreduce
           : k < 45 ? Kind::kBucket
           : k < 58 ? Kind::kReduceScatter
           : k < 71 ? Kind::kAllgather
           : k < 83 ? Kind::kBroadcast
           : k < 88 ? Kind::kBarrier
                    : Kind::kSendRecv;
  o.dt = static_cast<DataType>(rng() % kNumDataTypes);
  o.op = static_cast<ReduceOp>(rng() % kNumReduceOps);
  static constexpr Algo kAlgos[] = {Algo::kAuto, Algo::kRing, Algo::kRecursiveDoubling};
  o.algo = kAlgos[rng() % 3];
  // Log-uniform count: as many small operations as large ones.
  const double l = std::uniform_real_distribution<double>(0, std::log(double(max_count)))(rng);
  o.count = std::max<size_t>(1, static_cast<size_t>(std::exp(l)));
  if (o.kind == Kind::kReduceScatter || o.kind == Kind::kAllgather)
    o.count = std::max<size_t>(1, o.count / static_cast<size_t>(ranks));
  o.root = static_cast<int>(rng() % static_cast<uint64_t>(ranks));
  if (o.kind == Kind::kSendRecv) o.root = 1 + static_cast<int>(rng() % (ranks - 1));
  o.in_place = rng() % 2;
  o.salt = rng();
  return o;
}

std::string describe(const Op& o) {
  static const char* kKinds[] = {"allreduce", "allreduce-bucket", "reduce_scatter", "allgather",
                                 "broadcast", "barrier",          "send/recv"};
  return std::string(kKinds[static_cast<int>(o.kind)]) + " " + dtype_name(o.dt) + " " +
         op_name(o.op) + " count " + std::to_string(o.count) + " algo " + algo_name(o.algo) +
         " root/shift " + std::to_string(o.root) + (o.in_place ? " in place" : "");
}

int64_t input(const Op& o, int rank, size_t i) {
  const uint64_t h = mix(o.salt ^ mix((static_cast<uint64_t>(rank) << 40) ^ i));
  if (o.op == ReduceOp::kProd) {
    // Powers of two up to 2 from the first 4 ranks only: products stay <= 16 (exact in fp16).
    const int64_t mag = rank < 4 && (h & 2) ? 2 : 1;
    return o.dt == DataType::kUInt8 || !(h & 1) ? mag : -mag;
  }
  if (o.dt == DataType::kUInt8) return static_cast<int64_t>(h % 4);  // 0..3
  return static_cast<int64_t>(h % 7) - 3;                            // -3..3
}

void store(DataType dt, double v, void* p) {
  switch (dt) {
    case DataType::kFloat32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(p, &v, 8);
      break;
    case DataType::kFloat16: {
      _Float16 h = static_cast<_Float16>(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case DataType::kBFloat16: {
      uint16_t h = to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DataType::kInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kInt64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DataType::kUInt8:
      *static_cast<uint8_t*>(p) = static_cast<uint8_t>(static_cast<int64_t>(v));
      break;
  }
}

double load(DataType dt, const void* p) {
  switch (dt) {
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DataType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DataType::kFloat16: {
      _Float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return from_bf16(h);
    }
    case DataType::kInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DataType::kInt64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case DataType::kUInt8:
      return *static_cast<const uint8_t*>(p);
  }
  return 0;
}

double reduced(const Op& o, int ranks, size_t i) {
  int64_t acc = input(o, 0, i);
  for (int r = 1; r < ranks; ++r) {
    const int64_t v = input(o, r, i);
    switch (o.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  if (o.dt == DataType::kUInt8) acc &= 0xFF;  // uint8 wraps (sum of <= 64 ranks of 0..3 never)
  if (o.op != ReduceOp::kAvg) return static_cast<double>(acc);
  if (is_int(o.dt)) return static_cast<double>(acc / ranks);  // truncates toward zero
  return static_cast<double>(acc) / ranks;
}

bool same(const Op& o, double got, double want) {
  if (o.op != ReduceOp::kAvg || is_int(o.dt)) return got == want;
  double rel = o.dt == DataType::kFloat16    ? 1e-3
               : o.dt == DataType::kBFloat16 ? 8e-3
               : o.dt == DataType::kFloat32  ? 1e-6
                                             : 1e-12;
  return std::fabs(got - want) <= rel * std::fabs(want) + 1e-30;
}

}  // namespace gw::soak
