// The CUDA device-ops table: cudart (linked statically, so libgradwire loads where libcuda is
// absent; cudart opens libcuda on the first call), every call checked, errors as gw::Status.
// The driver API (dma-buf export) is reached through cudaGetDriverEntryPointByVersion, so
// nothing links libcuda.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>

#include "cuda_reduce.h"
#include "cuda_status.h"
#include "gw_device.h"
#include "log.h"

namespace gw::drv::cuda {
namespace {

class CudaDeviceOps final : public DeviceOps {
 public:
  const char* name() const override { return "cuda"; }
  Status available() override;
  std::string describe() override;
  Result<void*> alloc_device(size_t bytes) override;
  void free_device(void* p) override { (void)cudaFree(p); }
  Result<void*> alloc_pinned(size_t bytes) override;
  void free_pinned(void* p) override { (void)cudaFreeHost(p); }
  MemKind pointer_kind(const void* p) override;
  Result<DeviceStream> create_stream() override;
  void destroy_stream(DeviceStream s) override {
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(s));
  }
  Result<DeviceEvent> create_event() override;
  void destroy_event(DeviceEvent e) override {
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }
  Status copy_async(void* dst, const void* src, size_t n, DeviceStream s) override;
  Status record(DeviceEvent e, DeviceStream s) override;
  Result<bool> query(DeviceEvent e) override;
  Status synchronize(DeviceStream s) override;
  Result<DmaBuf> export_dmabuf(void* addr, size_t length) override;
  bool can_reduce() const override { return true; }
  Status reduce(DataType dt, ReduceOp op, void* dst, const void* a, const void* b, size_t count,
                uint32_t divisor, DeviceStream s) override {
    return launch_reduce(dt, op, dst, a, b, count, divisor, s);
  }

 private:
  std::once_flag once_;
  Status avail_;
  bool ok_ = false;
  std::string desc_;
};

Status CudaDeviceOps::available() {
  std::call_once(once_, [this] {
    // No NVIDIA device node (Linux) nor WSL's /dev/dxg: no GPU, and no reason to start the
    // CUDA runtime (which would look for libcuda) in every process that only uses host memory.
    struct stat st {};
    if (::stat("/dev/nvidiactl", &st) != 0 && ::stat("/dev/dxg", &st) != 0) {
      avail_ = Status(Code::kNotSupported,
                      "cuda: no usable GPU: no /dev/nvidiactl (run on a machine with an NVIDIA "
                      "GPU and its driver loaded; `nvidia-smi` must list the GPU)");
      return;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      (void)cudaGetLastError();
      avail_ =
          Status(Code::kNotSupported, std::string("cuda: no usable GPU: cudaGetDeviceCount: ") +
                                          (e == cudaSuccess ? "0 devices" : cuda_error_text(e)) +
                                          " (run on a machine with an NVIDIA GPU and its driver; "
                                          "`nvidia-smi` must list the GPU)");
      log::get("gw.drv.cuda")->debug("{}", avail_.to_string());
      return;
    }
    int dev = 0, drv = 0, rt = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
      (void)cudaDriverGetVersion(&drv);
      (void)cudaRuntimeGetVersion(&rt);
      desc_ = std::string(prop.name) + " (device " + std::to_string(dev) + " of " +
              std::to_string(n) + ", sm_" + std::to_string(prop.major) +
              std::to_string(prop.minor) + ", driver " + std::to_string(drv) + ", runtime " +
              std::to_string(rt) + ")";
    }
    ok_ = true;
    log::get("gw.drv.cuda")->info("cuda: {}", desc_);
  });
  return avail_;
}

std::string CudaDeviceOps::describe() {
  Status st = available();
  return st.ok() ? desc_ : st.to_string();
}

Result<void*> CudaDeviceOps::alloc_device(size_t bytes) {
  GW_RETURN_IF_ERROR(available());
  void* p = nullptr;
  GW_RETURN_IF_ERROR(
      check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc(" + std::to_string(bytes) + " bytes)"));
  return p;
}

Result<void*> CudaDeviceOps::alloc_pinned(size_t bytes) {
  GW_RETURN_IF_ERROR(available());
  void* p = nullptr;
  GW_RETURN_IF_ERROR(check(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable),
                           "cudaHostAlloc(" + std::to_string(bytes) + " bytes, pinned)"));
  return p;
}

MemKind CudaDeviceOps::pointer_kind(const void* p) {
  if (!ok_ && !available().ok()) return MemKind::kHost;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return MemKind::kHost;
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged:
      return MemKind::kCudaDevice;
    case cudaMemoryTypeHost:
      return MemKind::kCudaHost;
    default:
      return MemKind::kHost;
  }
}

Result<DeviceStream> CudaDeviceOps::create_stream() {
  GW_RETURN_IF_ERROR(available());
  cudaStream_t s = nullptr;
  GW_RETURN_IF_ERROR(
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  return static_cast<DeviceStream>(s);
}

Result<DeviceEvent> CudaDeviceOps::create_event() {
  GW_RETURN_IF_ERROR(available());
  cudaEvent_t e = nullptr;
  GW_RETURN_IF_ERROR(
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
  return static_cast<DeviceEvent>(e);
}

Status CudaDeviceOps::copy_async(void* dst, const void* src, size_t n, DeviceStream s) {
  if (n == 0) return Status();
  return check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, static_cast<cudaStream_t>(s)),
               "cudaMemcpyAsync(" + std::to_string(n) + " bytes)");
}

Status CudaDeviceOps::record(DeviceEvent e, DeviceStream s) {
  return check(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)),
               "cudaEventRecord");
}

Result<bool> CudaDeviceOps::query(DeviceEvent e) {
  cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
  if (r == cudaSuccess) return true;
  if (r == cudaErrorNotReady) return false;
  return check(r, "cudaEventQuery (an earlier copy or kernel on this stream failed)");
}

Status CudaDeviceOps::synchronize(DeviceStream s) {
  return check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
}

Result<DmaBuf> CudaDeviceOps::export_dmabuf(void* addr, size_t length) {
  GW_RETURN_IF_ERROR(available());
  using Fn = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 11070,
                                                   cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) {
    (void)cudaGetLastError();
    return Status(Code::kNotSupported,
                  "cuda: the driver has no cuMemGetHandleForAddressRange (dma-buf export needs "
                  "driver >= 515 with the open kernel modules); use nvidia-peermem or staging");
  }
  // dma-buf covers whole pages: export the page-aligned range, report where addr lies in it.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t base = a & ~(page - 1);
  const size_t span = (a + length - base + page - 1) & ~(page - 1);
  int fd = -1;
  CUresult r = reinterpret_cast<Fn>(fn)(&fd, static_cast<CUdeviceptr>(base), span,
                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CUDA_SUCCESS) {
    return Status(r == CUDA_ERROR_NOT_SUPPORTED ? Code::kNotSupported : Code::kInvalidArgument,
                  "cuda: cuMemGetHandleForAddressRange(" + std::to_string(span) +
                      " bytes) failed with CUresult " + std::to_string(static_cast<int>(r)) +
                      " (needs device memory from cudaMalloc, Linux >= 5.12 and a dma-buf "
                      "capable driver; otherwise use nvidia-peermem or staging)");
  }
  return DmaBuf(fd, a - base, length);
}

CudaDeviceOps g_cuda_ops;

}  // namespace
}  // namespace gw::drv::cuda

GW_REGISTER_DEVICE_OPS(cuda, &gw::drv::cuda::g_cuda_ops);
