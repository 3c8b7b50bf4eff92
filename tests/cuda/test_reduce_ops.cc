// The CUDA kernels' element semantics (cuda_reduce_ops.h, compiled here for the host) against
// lib/coll's CPU kernels, byte for byte, for every dtype, op and avg divisor, on inputs with
// NaNs, infinities, subnormals and signed zeros. On the GPU the same functions run, except the
// float16 conversions of ordinary values, which use the hardware's round-to-nearest-even
// (test_cuda.cc checks those on a GPU).
#include <gtest/gtest.h>

#include "cuda_compare.h"
#include "cuda_reduce_ops.h"

namespace gw::cuda_test {
namespace {

namespace ops = drv::cuda::ops;

template <class C>
void host_reduce(ReduceOp op, uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t n,
                 uint32_t div) {
  using T = typename C::Store;
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    const T r = C::apply(static_cast<int>(op), x, y, div);
    std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
  }
}

void host_reduce(DataType dt, ReduceOp op, uint8_t* d, const uint8_t* a, const uint8_t* b, size_t n,
                 uint32_t div) {
  switch (dt) {
    case DataType::kFloat32:
      return host_reduce<ops::F32>(op, d, a, b, n, div);
    case DataType::kFloat64:
      return host_reduce<ops::F64>(op, d, a, b, n, div);
    case DataType::kFloat16:
      return host_reduce<ops::F16>(op, d, a, b, n, div);
    case DataType::kBFloat16:
      return host_reduce<ops::BF16>(op, d, a, b, n, div);
    case DataType::kInt32:
      return host_reduce<ops::I32>(op, d, a, b, n, div);
    case DataType::kInt64:
      return host_reduce<ops::I64>(op, d, a, b, n, div);
    case DataType::kUInt8:
      return host_reduce<ops::U8>(op, d, a, b, n, div);
  }
}

class ReduceOpsHost : public ::testing::TestWithParam<DataType> {};

TEST_P(ReduceOpsHost, SameBytesAsTheCpuKernels) {
  const DataType dt = GetParam();
  const bool exact_nan = cpu_is_x86_f16c();
  if (!exact_nan) {
    std::cout << "note: CPU kernels dispatch to " << coll::reduce_target_name()
              << ", not x86 F16C: NaN payloads are compared as NaN only\n";
  }
  const size_t n = 4099;
  const auto a = random_elems(dt, n, 11), b = random_elems(dt, n, 12);
  for (int op = 0; op < kNumReduceOps; ++op) {
    for (uint32_t div : {0u, 3u}) {
      const auto rop = static_cast<ReduceOp>(op);
      if (div && rop != ReduceOp::kAvg) continue;
      std::vector<uint8_t> want(a.size()), got(a.size());
      coll::reduce(dt, rop, want.data(), a.data(), b.data(), n, div);
      host_reduce(dt, rop, got.data(), a.data(), b.data(), n, div);
      EXPECT_EQ(compare(dt, got, want, a, b, exact_nan), "")
          << dtype_name(dt) << " " << op_name(rop) << " divisor " << div;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceOpsHost,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64,
                                           DataType::kFloat16, DataType::kBFloat16,
                                           DataType::kInt32, DataType::kInt64, DataType::kUInt8),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace gw::cuda_test
