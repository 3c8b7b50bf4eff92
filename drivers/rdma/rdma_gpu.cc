// GPUDirect RDMA detection.
#include "rdma_gpu.h"

#include "gw_device.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace gw::drv::rdma {

GpuFacts probe_gpu_facts() {
  GpuFacts f;
  auto ops = device_ops();
  f.device_ops = ops.ok() && (*ops)->available().ok();
  struct stat st {};
  f.peermem = ::stat("/sys/module/nvidia_peermem", &st) == 0;
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return f;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(h, "cuDeviceGetCount"));
  f.dmabuf_export = reinterpret_cast<DmabufExportFn>(::dlsym(h, "cuMemGetHandleForAddressRange"));
  f.dmabuf_symbol = f.dmabuf_export != nullptr;
  if (init && count && init(0) == 0) {
    f.libcuda = true;
    int n = 0;
    if (count(&n) == 0) f.cuda_devices = n;
  }
  // The library stays loaded: CUDA must not be unloaded while the process uses it.
  return f;
}

Result<GpuPath> choose_gpu_path(const std::string& mode, bool strict, const GpuFacts& f) {
  const bool cuda = f.libcuda && f.cuda_devices > 0;
  const bool dmabuf = cuda && f.dmabuf_symbol;
  const bool peermem = cuda && f.peermem;
  std::string facts = std::string("CUDA driver ") + (f.libcuda ? "loaded" : "absent") + ", " +
                      std::to_string(f.cuda_devices) + " GPU(s), dma-buf export " +
                      (f.dmabuf_symbol ? "available" : "absent") + ", nvidia_peermem " +
                      (f.peermem ? "loaded" : "not loaded") + ", device copies " +
                      (f.device_ops ? "available" : "absent");
  if (mode != "auto" && mode != "dmabuf" && mode != "peermem" && mode != "staging") {
    return Status(Code::kInvalidArgument,
                  "rdma.gpu = '" + mode + "': use auto, dmabuf, peermem or staging");
  }
  if ((mode == "dmabuf" && !dmabuf) || (mode == "peermem" && !peermem)) {
    return Status(Code::kNotSupported,
                  "rdma.gpu = " + mode + " but this system lacks it (" + facts + ")");
  }
  if (mode == "dmabuf" || (mode == "auto" && dmabuf)) {
    return GpuPath{"dmabuf", true, "GPUDirect RDMA through dma-buf (" + facts + ")",
                   f.dmabuf_export};
  }
  if (mode == "peermem" || (mode == "auto" && peermem))
    return GpuPath{"peermem", true, "GPUDirect RDMA through nvidia-peermem (" + facts + ")"};
  if (strict) {
    return Status(Code::kNotSupported,
                  "rdma.gpu_strict is set and no GPUDirect path exists (" + facts +
                      "): load nvidia_peermem or use a dma-buf capable driver, or unset "
                      "rdma.gpu_strict to stage through host memory");
  }
  if (mode == "staging" && !f.device_ops) {
    return Status(Code::kNotSupported, "rdma.gpu = staging but no device-copy table is usable (" +
                                           facts +
                                           "): build gradwire with CUDA (nvcc) and run "
                                           "where a GPU and its driver are present");
  }
  return GpuPath{f.device_ops ? "staging" : "none", false,
                 f.device_ops ? "CUDA memory staged through pinned host buffers (" + facts + ")"
                              : "no CUDA memory support (" + facts + ")"};
}

Result<GpuPath> probe_gpu(const Config& cfg, ibv_pd* /*pd*/) {
  ConfigReader r(cfg);
  const std::string want = r.str("rdma.gpu");
  const bool strict = r.flag("rdma.gpu_strict");
  GW_RETURN_IF_ERROR(r.status());
  GpuFacts f = probe_gpu_facts();
  return choose_gpu_path(want, strict, f);
}

GpuReg gpu_registration(const GpuPath& path) {
  if (path.name == "dmabuf" && path.zero_copy) return GpuReg::kDmabuf;
  if (path.name == "peermem" && path.zero_copy) return GpuReg::kPeermem;
  return GpuReg::kRefuse;
}

DmabufRange dmabuf_range(uint64_t addr, size_t len, uint64_t page) {
  DmabufRange r;
  r.base = addr & ~(page - 1);
  r.size = ((addr + len + page - 1) & ~(page - 1)) - r.base;
  r.offset = addr - r.base;
  return r;
}

namespace {

std::string describe_gpu(const void* addr, size_t len) {
  char b[64];
  std::snprintf(b, sizeof b, "%p, %zu bytes of CUDA memory", addr, len);
  return b;
}

Status verbs_error(const std::string& what, int err) {
  const bool pin = err == ENOMEM || err == EPERM || err == EAGAIN;
  return Status(pin ? Code::kResourceExhausted : Code::kSystemError,
                what + (pin ? " (raise the locked-memory limit: `ulimit -l unlimited`)" : ""), err);
}

}  // namespace

Result<ibv_mr*> register_cuda(ibv_pd* pd, const GpuPath& path, void* addr, size_t len, int access,
                              const std::string& dev) {
  const std::string what = describe_gpu(addr, len) + " on " + dev;
  auto a = reinterpret_cast<uintptr_t>(addr);
  if (addr == nullptr || len == 0 || a + len < a) {
    return Status(Code::kInvalidArgument,
                  "rdma: cannot register (" + what + "): null, empty or wrapping range");
  }
  switch (gpu_registration(path)) {
    case GpuReg::kPeermem: {
      ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
      if (!mr) return verbs_error("rdma: ibv_reg_mr(" + what + ") through nvidia-peermem", errno);
      return mr;
    }
    case GpuReg::kDmabuf: {
      if (!path.dmabuf_export) {
        return Status(Code::kInternal, "rdma: dma-buf path chosen without the CUDA export");
      }
      static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
      DmabufRange r = dmabuf_range(a, len, page);
      int fd = -1;
      int cu = path.dmabuf_export(&fd, r.base, r.size, kCuMemRangeHandleTypeDmaBufFd, 0);
      if (cu != 0 || fd < 0) {
        return Status(Code::kSystemError,
                      "rdma: cuMemGetHandleForAddressRange(" + what + ") failed with CUresult " +
                          std::to_string(cu) +
                          " (is it device memory from cudaMalloc/cuMemAlloc? a driver >= 515 "
                          "with dma-buf support? else set rdma.gpu=peermem or staging)");
      }
      ibv_mr* mr = ibv_reg_dmabuf_mr(pd, r.offset, len, a, fd, access);
      int err = errno;
      ::close(fd);  // the registration holds its own reference to the dma-buf
      if (!mr) return verbs_error("rdma: ibv_reg_dmabuf_mr(" + what + ")", err);
      return mr;
    }
    case GpuReg::kRefuse:
      break;
  }
  // The staging path never registers device memory (the data path copies it through pinned
  // buffers, rdma_staging.cc); reaching here means there is neither GPUDirect nor staging.
  return Status(Code::kNotSupported,
                "rdma: cannot register " + what + ": no GPUDirect RDMA path (" + path.why +
                    "): load nvidia_peermem, use a dma-buf capable GPU driver, or set "
                    "rdma.gpu=staging where gradwire's CUDA driver can copy device memory");
}

}  // namespace gw::drv::rdma
