/// @file cuda_compare.h
/// Inputs with every kind of value (random bit patterns: NaNs, infinities, subnormals, signed
/// zeros) and an element-by-element byte comparison that names the first difference. Shared
/// by the host check of the CUDA element semantics and the GPU kernel test.
/// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gw_coll_types.h"
#include "reduce_kernels.h"

namespace gw::cuda_test {

/// `count` elements of random bits, with some exact specials mixed in.
inline std::vector<uint8_t> random_elems(DataType dt, size_t count, uint32_t seed) {
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> v(count * es);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  // Small integers in a third of the float elements, so sums and products are also ordinary.
  for (size_t i = 0; i < count; i += 3) {
    const float f = static_cast<float>(static_cast<int>(rng() % 64) - 32) * 0.25f;
    if (dt == DataType::kFloat32) std::memcpy(&v[i * es], &f, 4);
    if (dt == DataType::kFloat64) {
      const double d = f;
      std::memcpy(&v[i * es], &d, 8);
    }
    if (dt == DataType::kFloat16 || dt == DataType::kBFloat16) {
      const uint16_t h = dt == DataType::kFloat16 ? coll::float_to_half(f) : coll::float_to_bf16(f);
      std::memcpy(&v[i * es], &h, 2);
    }
  }
  return v;
}

/// NaN in its type (for the comparisons that may not hold NaN payloads to account).
inline bool is_nan(DataType dt, const uint8_t* p) {
  uint64_t u = 0;
  std::memcpy(&u, p, dtype_size(dt));
  switch (dt) {
    case DataType::kFloat32:
      return (u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu);
    case DataType::kFloat64:
      return (u & 0x7FF0000000000000ull) == 0x7FF0000000000000ull && (u & 0xFFFFFFFFFFFFFull);
    case DataType::kFloat16:
      return (u & 0x7C00u) == 0x7C00u && (u & 0x3FFu);
    case DataType::kBFloat16:
      return (u & 0x7F80u) == 0x7F80u && (u & 0x7Fu);
    default:
      return false;
  }
}

/// "" when equal byte for byte, else the first element that differs with both values in hex.
/// NaN results are compared as NaN only where both inputs a[i] and b[i] are NaN (which one
/// x86 returns then depends on how the compiler ordered the commutative operands), or
/// everywhere unless `exact_nan`.
inline std::string compare(DataType dt, const std::vector<uint8_t>& got,
                           const std::vector<uint8_t>& want, const std::vector<uint8_t>& a,
                           const std::vector<uint8_t>& b, bool exact_nan) {
  const size_t es = dtype_size(dt);
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size() / es; ++i) {
    const uint8_t* g = &got[i * es];
    const uint8_t* w = &want[i * es];
    if (std::memcmp(g, w, es) == 0) continue;
    const bool loose = !exact_nan || (is_nan(dt, &a[i * es]) && is_nan(dt, &b[i * es]));
    if (loose && is_nan(dt, g) && is_nan(dt, w)) continue;
    uint64_t gu = 0, wu = 0;
    std::memcpy(&gu, g, es);
    std::memcpy(&wu, w, es);
    char buf[96];
    std::snprintf(buf, sizeof buf, "element %zu: got 0x%llx, CPU kernel 0x%llx", i,
                  static_cast<unsigned long long>(gu), static_cast<unsigned long long>(wu));
    return buf;
  }
  return "";
}

/// Whether the CPU kernels run with x86 F16C semantics (what the CUDA kernels reproduce,
/// NaN payloads included).
inline bool cpu_is_x86_f16c() {
  const std::string t = coll::reduce_target_name();
  return t.rfind("AVX", 0) == 0;
}

}  // namespace gw::cuda_test
