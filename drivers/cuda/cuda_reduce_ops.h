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

#include "cuda_half.h"

namespace gw::drv::cuda::ops {

enum Kind : int { kSum = 0, kProd, kMin, kMax, kAvg };  // the order of gw::ReduceOp

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
