/// @file cuda_half.h
/// Bit casts and the 16-bit float conversions (float16, bfloat16 <-> float) of the reduction
/// ops (cuda_reduce_ops.h), for GPU kernels and the host alike, with the CPU kernels' NaN and
/// rounding rules (see there).
/// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define GW_HD __host__ __device__ __forceinline__
#else
#define GW_HD inline
#endif

namespace gw::drv::cuda::ops {

// Bit casts for host and device code (memcpy of a register compiles to a move on both).
template <class To, class From>
GW_HD To bits(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &x, sizeof t);
  return t;
}
GW_HD uint32_t f2u(float f) { return bits<uint32_t>(f); }
GW_HD float u2f(uint32_t u) { return bits<float>(u); }
GW_HD uint64_t d2u(double f) { return bits<uint64_t>(f); }
GW_HD double u2d(uint64_t u) { return bits<double>(u); }

// float16 <-> float. NaNs by hand (x86 keeps payloads, the GPU canonicalises); the rest by the
// GPU's round-to-nearest-even conversion, or on the host the same arithmetic as lib/coll's.
GW_HD float h2f(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 31) return u2f(sign | 0x7F800000u | (mant ? 0x00400000u : 0u) | (mant << 13));
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  if (exp == 0) return u2f(f2u(static_cast<float>(mant) * (1.0f / 16777216.0f)) | sign);
  return u2f(sign | ((exp + 112) << 23) | (mant << 13));
#endif
}

GW_HD uint16_t f2h(float f) {
  uint32_t u = f2u(f);
  const uint32_t sign = u & 0x80000000u;
  if (f != f) return static_cast<uint16_t>((sign >> 16) | 0x7E00u | ((u >> 13) & 0x3FFu));
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  constexpr uint32_t kF16Max = (127 + 16) << 23;
  constexpr uint32_t kDenormMagic = ((127 - 15) + (23 - 10) + 1) << 23;
  u ^= sign;
  uint16_t o;
  if (u >= kF16Max) {
    o = 0x7C00;
  } else if (u < (113u << 23)) {
    const float v = u2f(u) + u2f(kDenormMagic);
    o = static_cast<uint16_t>(f2u(v) - kDenormMagic);
  } else {
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFF + ((u >> 13) & 1);
    o = static_cast<uint16_t>(u >> 13);
  }
  return static_cast<uint16_t>(o | (sign >> 16));
#endif
}

GW_HD float b2f(uint16_t h) { return u2f(static_cast<uint32_t>(h) << 16); }
// As the CPU kernels: NaN keeps its top payload bits and is made quiet (rounding could carry
// a NaN into infinity); the rest rounds to nearest even.
GW_HD uint16_t f2b(float f) {
  const uint32_t u = f2u(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace gw::drv::cuda::ops
