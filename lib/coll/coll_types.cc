// Names of algorithms and call descriptors, the scalar float16/bfloat16
// conversions, and the registered scratch buffers (RegBuf).
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>

#include "coll_impl.h"
#include "reduce_kernels.h"

namespace gw {
namespace {

constexpr std::pair<const char*, Algo> kAlgoNames[] = {{"auto", Algo::kAuto},
                                                       {"ring", Algo::kRing},
                                                       {"rd", Algo::kRecursiveDoubling},
                                                       {"hier", Algo::kHierarchical}};

}  // namespace

const char* algo_name(Algo a) {
  for (auto& [n, v] : kAlgoNames) {
    if (v == a) return n;
  }
  return "unknown";
}

std::optional<Algo> parse_algo(std::string_view name) {
  for (auto& [n, v] : kAlgoNames) {
    if (name == n) return v;
  }
  return std::nullopt;
}

namespace coll {

// F. Giesen's float_to_half_fast3_rtne: round to nearest even, NaN -> quiet NaN, overflow -> inf.
uint16_t float_to_half(float f) {
  constexpr uint32_t kF16Max = (127 + 16) << 23;
  constexpr uint32_t kDenormMagic = ((127 - 15) + (23 - 10) + 1) << 23;
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t o;
  if (u >= kF16Max) {
    o = u > 0x7F800000u ? 0x7E00 : 0x7C00;
  } else if (u < (113u << 23)) {  // subnormal or zero: let the FPU round
    float v = std::bit_cast<float>(u) + std::bit_cast<float>(kDenormMagic);
    o = static_cast<uint16_t>(std::bit_cast<uint32_t>(v) - kDenormMagic);
  } else {
    const uint32_t mant_odd = (u >> 13) & 1;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFF + mant_odd;
    o = static_cast<uint16_t>(u >> 13);
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24, exact
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t float_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if (f != f) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

namespace {
template <class T>
void divide_as(void* dst, const void* src, size_t n, uint32_t divisor) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, static_cast<const char*>(src) + i * sizeof(T), sizeof(T));
    v = static_cast<T>(v / static_cast<T>(divisor));
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &v, sizeof(T));
  }
}
template <uint16_t (*Enc)(float), float (*Dec)(uint16_t)>
void divide_narrow(void* dst, const void* src, size_t n, uint32_t divisor) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* s = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = Enc(Dec(s[i]) / static_cast<float>(divisor));
}
}  // namespace

void divide(DataType dt, void* dst, const void* src, size_t count, uint32_t divisor) {
  if (divisor == 0) divisor = 1;
  switch (dt) {
    case DataType::kFloat32:
      return divide_as<float>(dst, src, count, divisor);
    case DataType::kFloat64:
      return divide_as<double>(dst, src, count, divisor);
    case DataType::kFloat16:
      return divide_narrow<float_to_half, half_to_float>(dst, src, count, divisor);
    case DataType::kBFloat16:
      return divide_narrow<float_to_bf16, bf16_to_float>(dst, src, count, divisor);
    case DataType::kInt32:
      return divide_as<int32_t>(dst, src, count, divisor);
    case DataType::kInt64:
      return divide_as<int64_t>(dst, src, count, divisor);
    case DataType::kUInt8:
      return divide_as<uint8_t>(dst, src, count, divisor);
  }
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAllreduce:
      return "allreduce";
    case Kind::kReduceScatter:
      return "reduce_scatter";
    case Kind::kAllgather:
      return "allgather";
    case Kind::kBroadcast:
      return "broadcast";
    case Kind::kBarrier:
      return "barrier";
    case Kind::kSend:
      return "send";
    case Kind::kRecv:
      return "recv";
    case Kind::kAlltoall:
      return "alltoall";
    case Kind::kAlltoallv:
      return "alltoallv";
    case Kind::kGather:
      return "gather";
    case Kind::kScatter:
      return "scatter";
  }
  return "unknown";
}

std::string describe(const Desc& d) {
  std::string s = std::string(kind_name(static_cast<Kind>(d.kind))) + " #" + std::to_string(d.seq) +
                  "(count=" + std::to_string(d.count) + ", " +
                  dtype_name(static_cast<DataType>(d.dtype));
  if (d.kind <= static_cast<uint8_t>(Kind::kReduceScatter))
    s += std::string(", ") + op_name(static_cast<ReduceOp>(d.op));
  if (d.kind == static_cast<uint8_t>(Kind::kAllreduce))
    s += std::string(", ") + algo_name(static_cast<Algo>(d.algo));
  const auto k = static_cast<Kind>(d.kind);
  if (k == Kind::kBroadcast || k == Kind::kGather || k == Kind::kScatter)
    s += ", root=" + std::to_string(d.root);
  if (k == Kind::kSend || k == Kind::kRecv) s += ", peer=" + std::to_string(d.root);
  if (k == Kind::kAlltoall) s += d.algo ? ", bruck" : ", pairwise";
  if (k == Kind::kGather || k == Kind::kScatter) s += d.algo ? ", tree" : ", direct";
  if (d.kind == static_cast<uint8_t>(Kind::kBarrier)) return s + ")";
  return s + (d.device ? ", device buffers)" : ", host buffers)");
}

Status RegBuf::ensure(Transport& t, size_t bytes) {
  if (bytes <= cap_ && mem_) return Status();
  size_t cap = std::max<size_t>(bytes, 64);
  cap = (cap + 4095) / 4096 * 4096;
  mr_ = MemoryRegion();
  mem_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, cap)));
  cap_ = 0;
  if (!mem_) {
    return Status(Code::kResourceExhausted,
                  "coll: cannot allocate " + std::to_string(cap) + " bytes of scratch");
  }
  auto mr = t.register_memory(mem_.get(), cap, MemKind::kHost);
  if (!mr.ok()) return mr.status().with_context("coll: registering scratch");
  mr_ = std::move(*mr);
  cap_ = cap;
  return Status();
}

}  // namespace coll
}  // namespace gw
