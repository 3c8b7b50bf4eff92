// CUDA reduction kernels: dst[i] = a[i] op b[i], 16-byte loads and stores (uint4) in a
// grid-stride loop, scalar tail; one kernel per (type, op) so the op is resolved at compile
// time. Element semantics are in cuda_reduce_ops.h (the same bytes as lib/coll's CPU kernels).
#include <cuda_runtime.h>

#include <mutex>

#include "cuda_reduce.h"
#include "cuda_reduce_ops.h"
#include "cuda_status.h"

namespace gw::drv::cuda {
namespace {

constexpr int kThreads = 256;

// No __restrict__: dst may be a or b (the allreduce reduces in place).
template <class C, int Op>
__global__ void reduce_vec(typename C::Store* dst, const typename C::Store* a,
                           const typename C::Store* b, size_t n, uint32_t div) {
  using T = typename C::Store;
  constexpr int kLanes = 16 / sizeof(T);
  union Pack {
    uint4 v;
    T e[kLanes];
  };
  const size_t nv = n / kLanes;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  const size_t first = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (size_t i = first; i < nv; i += stride) {
    Pack x, y, r;
    x.v = reinterpret_cast<const uint4*>(a)[i];
    y.v = reinterpret_cast<const uint4*>(b)[i];
#pragma unroll
    for (int k = 0; k < kLanes; ++k) r.e[k] = C::apply(Op, x.e[k], y.e[k], div);
    reinterpret_cast<uint4*>(dst)[i] = r.v;
  }
  for (size_t i = nv * kLanes + first; i < n; i += stride) dst[i] = C::apply(Op, a[i], b[i], div);
}

// Operands not all 16-byte aligned (a buffer at an odd element offset): element by element.
template <class C, int Op>
__global__ void reduce_scalar(typename C::Store* dst, const typename C::Store* a,
                              const typename C::Store* b, size_t n, uint32_t div) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = C::apply(Op, a[i], b[i], div);
}

int max_blocks() {
  static std::once_flag once;
  static int blocks = 1024;
  std::call_once(once, [] {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms)
      blocks = sms * 8;
    (void)cudaGetLastError();
  });
  return blocks;
}

template <class C, int Op>
void launch_op(void* dst, const void* a, const void* b, size_t n, uint32_t div,
               cudaStream_t s) {
  using T = typename C::Store;
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  const auto misaligned = (reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(a) |
                           reinterpret_cast<uintptr_t>(b)) & 15u;
  const size_t per_thread = misaligned ? 1 : 16 / sizeof(T);
  const size_t want = (n / per_thread + kThreads - 1) / kThreads;
  const size_t cap = static_cast<size_t>(max_blocks());
  const int blocks = static_cast<int>(want < 1 ? 1 : (want > cap ? cap : want));
  if (misaligned)
    reduce_scalar<C, Op><<<blocks, kThreads, 0, s>>>(d, x, y, n, div);
  else
    reduce_vec<C, Op><<<blocks, kThreads, 0, s>>>(d, x, y, n, div);
}

template <class C>
void launch_type(ReduceOp op, void* dst, const void* a, const void* b, size_t n, uint32_t div,
                 cudaStream_t s) {
  switch (op) {
    case ReduceOp::kSum:
      return launch_op<C, ops::kSum>(dst, a, b, n, div, s);
    case ReduceOp::kProd:
      return launch_op<C, ops::kProd>(dst, a, b, n, div, s);
    case ReduceOp::kMin:
      return launch_op<C, ops::kMin>(dst, a, b, n, div, s);
    case ReduceOp::kMax:
      return launch_op<C, ops::kMax>(dst, a, b, n, div, s);
    case ReduceOp::kAvg:
      return launch_op<C, ops::kAvg>(dst, a, b, n, div, s);
  }
}

}  // namespace

Status launch_reduce(DataType dt, ReduceOp op, void* dst, const void* a, const void* b,
                     size_t count, uint32_t divisor, DeviceStream stream) {
  if (count == 0) return Status();
  auto s = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case DataType::kFloat32:
      launch_type<ops::F32>(op, dst, a, b, count, divisor, s);
      break;
    case DataType::kFloat64:
      launch_type<ops::F64>(op, dst, a, b, count, divisor, s);
      break;
    case DataType::kFloat16:
      launch_type<ops::F16>(op, dst, a, b, count, divisor, s);
      break;
    case DataType::kBFloat16:
      launch_type<ops::BF16>(op, dst, a, b, count, divisor, s);
      break;
    case DataType::kInt32:
      launch_type<ops::I32>(op, dst, a, b, count, divisor, s);
      break;
    case DataType::kInt64:
      launch_type<ops::I64>(op, dst, a, b, count, divisor, s);
      break;
    case DataType::kUInt8:
      launch_type<ops::U8>(op, dst, a, b, count, divisor, s);
      break;
    default:
      return Status(Code::kInvalidArgument, "cuda: reduce of an unknown dtype");
  }
  return check(cudaGetLastError(), std::string("reduction kernel launch (") + dtype_name(dt) +
                                       " " + op_name(op) + ", " + std::to_string(count) +
                                       " elements)");
}

}  // namespace gw::drv::cuda
