/// @file cuda_reduce_ops.h
/// One element of a reduction, written once for the GPU kernels and for the host (where
/// tests/cuda checks it against the CPU kernels of lib/coll byte for byte, on every CI run).
/// It reproduces what the CPU kernels do on x86 (SSE/AVX + F16C), including NaNs:
///  - float add/mul/div: a NaN result is the first NaN operand made quiet, else the default
///    NaN (sign set, 0xFFC00000), as x86 returns and unlike the GPU's canonical 0x7FFFFFFF;
///  - min/max: `a < b ? a : b` / `a > b ? a : b` (MINPS/MAXPS: the second operand when either
///    is NaN or both are zero);
///  - float16: widened exactly, NaN quieted; narrowed with round to nearest even (NaN keeps the
///    top 10 payload bits, quiet); bfloat16: a shift, and the CPU's integer rounding (NaN keeps
///    its top payload bits, quiet);
///  - integers wrap (two's complement); kAvg divides the sum once, truncating.
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

enum Kind : int { kSum = 0, kProd, kMin, kMax, kAvg };  // the order of gw::ReduceOp

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

// x86's NaN result rules (see the file comment).
GW_HD float x86_nan(float r, float a, float b) {
  if (r == r) return r;
  if (a != a) return u2f(f2u(a) | 0x00400000u);
  if (b != b) return u2f(f2u(b) | 0x00400000u);
  return u2f(0xFFC00000u);
}
GW_HD double x86_nan(double r, double a, double b) {
  if (r == r) return r;
  if (a != a) return u2d(d2u(a) | 0x0008000000000000ull);
  if (b != b) return u2d(d2u(b) | 0x0008000000000000ull);
  return u2d(0xFFF8000000000000ull);
}

template <class F>
GW_HD F float_op(int op, F a, F b, F div) {
  switch (op) {
    case kSum:
      return x86_nan(a + b, a, b);
    case kProd:
      return x86_nan(a * b, a, b);
    case kMin:
      return a < b ? a : b;
    case kMax:
      return a > b ? a : b;
    default: {  // kAvg: the final step divides once; div <= 1 means a plain sum
      const F s = x86_nan(a + b, a, b);
      return div > F(1) ? x86_nan(s / div, s, div) : s;
    }
  }
}

template <class T, class U>
GW_HD T int_op(int op, T a, T b, uint32_t div) {
  switch (op) {
    case kSum:
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case kProd:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case kMin:
      return a < b ? a : b;
    case kMax:
      return a > b ? a : b;
    default: {
      const T s = static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      return div > 1 ? static_cast<T>(s / static_cast<T>(div)) : s;
    }
  }
}

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

/// Storage type -> one reduced element. Half types go through float.
struct F32 {
  using Store = float;
  static GW_HD float apply(int op, float a, float b, uint32_t div) {
    return float_op<float>(op, a, b, static_cast<float>(div));
  }
};
struct F64 {
  using Store = double;
  static GW_HD double apply(int op, double a, double b, uint32_t div) {
    return float_op<double>(op, a, b, static_cast<double>(div));
  }
};
struct F16 {
  using Store = uint16_t;
  static GW_HD uint16_t apply(int op, uint16_t a, uint16_t b, uint32_t div) {
    return f2h(float_op<float>(op, h2f(a), h2f(b), static_cast<float>(div)));
  }
};
struct BF16 {
  using Store = uint16_t;
  static GW_HD uint16_t apply(int op, uint16_t a, uint16_t b, uint32_t div) {
    return f2b(float_op<float>(op, b2f(a), b2f(b), static_cast<float>(div)));
  }
};
template <class T, class U>
struct Int {
  using Store = T;
  static GW_HD T apply(int op, T a, T b, uint32_t div) { return int_op<T, U>(op, a, b, div); }
};
using I32 = Int<int32_t, uint32_t>;
using I64 = Int<int64_t, uint64_t>;
using U8 = Int<uint8_t, uint32_t>;

}  // namespace gw::drv::cuda::ops
