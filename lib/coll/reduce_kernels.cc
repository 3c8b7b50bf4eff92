// Reduction kernels: one Highway implementation compiled for every x86 (or other) target and
// chosen at run time (HWY_DYNAMIC_DISPATCH). Codecs load a storage type into compute lanes and
// store back, so float16/bfloat16 share the float32 loop: widen, reduce, round to nearest even.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/coll/reduce_kernels.cc"
#include "reduce_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace gw::coll {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Storage == compute type.
template <class T>
struct Native {
  using Store = T;
  using D = hn::ScalableTag<T>;
  static HWY_INLINE hn::Vec<D> load(D d, const T* p) { return hn::LoadU(d, p); }
  static HWY_INLINE void store(D d, hn::Vec<D> v, T* p) { hn::StoreU(v, d, p); }
};

// bfloat16 in uint16_t: widening is a shift; narrowing rounds to nearest even, NaN stays NaN
// (Highway 1.0's DemoteTo truncates, so it is done here in integer lanes).
struct BF16 {
  using Store = uint16_t;
  using D = hn::ScalableTag<float>;
  static HWY_INLINE hn::Vec<D> load(D d, const uint16_t* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<uint16_t, D> d16;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
  }
  static HWY_INLINE void store(D /*d*/, hn::Vec<D> v, uint16_t* p) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> d16;
    const auto bits = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1));
    auto r = hn::ShiftRight<16>(hn::Add(bits, hn::Add(lsb, hn::Set(du, 0x7FFF))));
    const auto quiet_nan = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x40));
    // IsNaN, not Ne(v, v): Highway's Ne is an ordered compare on x86 and never sees a NaN.
    r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, r);
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, r)), d16, p);
  }
};

#undef GW_HAVE_F16C  // this file is compiled once per target
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define GW_HAVE_F16C 1
// float16 via F16C (vcvtph2ps / vcvtps2ph, round to nearest even).
struct F16 {
  using Store = uint16_t;
  using D = hn::ScalableTag<float>;
  static HWY_INLINE hn::Vec<D> load(D d, const uint16_t* p) {
    const hn::Rebind<hwy::float16_t, D> d16;
    return hn::PromoteTo(d, hn::LoadU(d16, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static HWY_INLINE void store(D /*d*/, hn::Vec<D> v, uint16_t* p) {
    const hn::Rebind<hwy::float16_t, D> d16;
    hn::StoreU(hn::DemoteTo(d16, v), d16, reinterpret_cast<hwy::float16_t*>(p));
  }
};
#else
#define GW_HAVE_F16C 0
#endif

struct OpSum {
  template <class V>
  HWY_INLINE V operator()(V a, V b) const {
    return hn::Add(a, b);
  }
};
struct OpProd {
  template <class V>
  HWY_INLINE V operator()(V a, V b) const {
    return hn::Mul(a, b);
  }
};
struct OpMin {
  template <class V>
  HWY_INLINE V operator()(V a, V b) const {
    return hn::Min(a, b);
  }
};
struct OpMax {
  template <class V>
  HWY_INLINE V operator()(V a, V b) const {
    return hn::Max(a, b);
  }
};
// Final step of a floating-point average: (a + b) / n, rounded once in the compute type.
template <class V>
struct OpSumDiv {
  V n;
  HWY_INLINE V operator()(V a, V b) const { return hn::Div(hn::Add(a, b), n); }
};

// dst = f(a, b) over whole vectors; the tail goes through lane-sized buffers so that every
// element sees exactly the same instructions (bitwise-equal results wherever it lies).
template <class C, class F>
HWY_INLINE void binary(typename C::Store* dst, const typename C::Store* a,
                       const typename C::Store* b, size_t n, F f) {
  using T = typename C::Store;
  const typename C::D d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto r0 = f(C::load(d, a + i), C::load(d, b + i));
    const auto r1 = f(C::load(d, a + i + lanes), C::load(d, b + i + lanes));
    C::store(d, r0, dst + i);
    C::store(d, r1, dst + i + lanes);
  }
  for (; i + lanes <= n; i += lanes) C::store(d, f(C::load(d, a + i), C::load(d, b + i)), dst + i);
  if (i == n) return;
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float) > 64 ? HWY_MAX_BYTES : 64;
  alignas(64) T ta[kMax] = {}, tb[kMax] = {}, td[kMax];
  const size_t rest = n - i;
  std::memcpy(ta, a + i, rest * sizeof(T));
  std::memcpy(tb, b + i, rest * sizeof(T));
  C::store(d, f(C::load(d, ta), C::load(d, tb)), td);
  std::memcpy(dst + i, td, rest * sizeof(T));
}

template <class C>
HWY_INLINE void float_ops(ReduceOp op, void* dst, const void* a, const void* b, size_t n,
                          uint32_t divisor) {
  using T = typename C::Store;
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::kSum:
      return binary<C>(d, x, y, n, OpSum());
    case ReduceOp::kProd:
      return binary<C>(d, x, y, n, OpProd());
    case ReduceOp::kMin:
      return binary<C>(d, x, y, n, OpMin());
    case ReduceOp::kMax:
      return binary<C>(d, x, y, n, OpMax());
    case ReduceOp::kAvg:
      if (divisor <= 1) return binary<C>(d, x, y, n, OpSum());
      using V = hn::Vec<typename C::D>;
      using Lane = hn::TFromD<typename C::D>;
      return binary<C>(d, x, y, n,
                       OpSumDiv<V>{hn::Set(typename C::D(), static_cast<Lane>(divisor))});
  }
}

template <class T>
HWY_INLINE void int_divide(T* dst, size_t n, uint32_t divisor) {
  const T div = static_cast<T>(divisor);
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] / div);
}

template <class T>
HWY_INLINE void int_ops(ReduceOp op, void* dst, const void* a, const void* b, size_t n,
                        uint32_t divisor) {
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      binary<Native<T>>(d, x, y, n, OpSum());
      if (op == ReduceOp::kAvg && divisor > 1) int_divide(d, n, divisor);
      return;
    case ReduceOp::kProd:
      if constexpr (sizeof(T) == 1) {  // no 8-bit multiply in SIMD; wraps modulo 256
        for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(unsigned{x[i]} * unsigned{y[i]});
      } else {
        binary<Native<T>>(d, x, y, n, OpProd());
      }
      return;
    case ReduceOp::kMin:
      return binary<Native<T>>(d, x, y, n, OpMin());
    case ReduceOp::kMax:
      return binary<Native<T>>(d, x, y, n, OpMax());
  }
}

#if !GW_HAVE_F16C
// Targets without F16C: exact scalar conversion (Highway 1.0's emulation truncates).
HWY_INLINE float f16_apply(ReduceOp op, float x, float y, float div) {
  switch (op) {
    case ReduceOp::kSum:
      return x + y;
    case ReduceOp::kProd:
      return x * y;
    case ReduceOp::kMin:
      return x < y ? x : y;
    case ReduceOp::kMax:
      return x > y ? x : y;
    case ReduceOp::kAvg:
      return div > 1 ? (x + y) / div : x + y;
  }
  return 0;
}
#endif

void reduce_impl(DataType dt, ReduceOp op, void* dst, const void* a, const void* b, size_t n,
                 uint32_t divisor) {
  switch (dt) {
    case DataType::kFloat32:
      return float_ops<Native<float>>(op, dst, a, b, n, divisor);
    case DataType::kFloat64:
      return float_ops<Native<double>>(op, dst, a, b, n, divisor);
    case DataType::kBFloat16:
      return float_ops<BF16>(op, dst, a, b, n, divisor);
    case DataType::kFloat16: {
#if GW_HAVE_F16C
      return float_ops<F16>(op, dst, a, b, n, divisor);
#else
      auto* d = static_cast<uint16_t*>(dst);
      auto* x = static_cast<const uint16_t*>(a);
      auto* y = static_cast<const uint16_t*>(b);
      for (size_t i = 0; i < n; ++i) {
        d[i] = float_to_half(
            f16_apply(op, half_to_float(x[i]), half_to_float(y[i]), static_cast<float>(divisor)));
      }
      return;
#endif
    }
    case DataType::kInt32:
      return int_ops<int32_t>(op, dst, a, b, n, divisor);
    case DataType::kInt64:
      return int_ops<int64_t>(op, dst, a, b, n, divisor);
    case DataType::kUInt8:
      return int_ops<uint8_t>(op, dst, a, b, n, divisor);
  }
}

int64_t target_impl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace gw::coll
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gw::coll {

HWY_EXPORT(reduce_impl);
HWY_EXPORT(target_impl);

void reduce(DataType dt, ReduceOp op, void* dst, const void* a, const void* b, size_t count,
            uint32_t divisor) {
  if (count == 0) return;
  HWY_DYNAMIC_DISPATCH(reduce_impl)(dt, op, dst, a, b, count, divisor);
}

const char* reduce_target_name() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(target_impl)()); }

}  // namespace gw::coll
#endif  // HWY_ONCE
