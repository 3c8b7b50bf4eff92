// GPUDirect RDMA detection.
#include "rdma_gpu.h"

#include <dlfcn.h>
#include <sys/stat.h>

namespace gw::drv::rdma {

GpuFacts probe_gpu_facts() {
  GpuFacts f;
  struct stat st{};
  f.peermem = ::stat("/sys/module/nvidia_peermem", &st) == 0;
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return f;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(h, "cuDeviceGetCount"));
  f.dmabuf_symbol = ::dlsym(h, "cuMemGetHandleForAddressRange") != nullptr;
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
                      (f.peermem ? "loaded" : "not loaded");
  if (mode != "auto" && mode != "dmabuf" && mode != "peermem" && mode != "staging") {
    return Status(Code::kInvalidArgument,
                  "rdma.gpu = '" + mode + "': use auto, dmabuf, peermem or staging");
  }
  if ((mode == "dmabuf" && !dmabuf) || (mode == "peermem" && !peermem)) {
    return Status(Code::kNotSupported, "rdma.gpu = " + mode + " but this system lacks it (" +
                                           facts + ")");
  }
  if (mode == "dmabuf" || (mode == "auto" && dmabuf))
    return GpuPath{"dmabuf", true, "GPUDirect RDMA through dma-buf (" + facts + ")"};
  if (mode == "peermem" || (mode == "auto" && peermem))
    return GpuPath{"peermem", true, "GPUDirect RDMA through nvidia-peermem (" + facts + ")"};
  if (strict) {
    return Status(Code::kNotSupported,
                  "rdma.gpu_strict is set and no GPUDirect path exists (" + facts +
                      "): load nvidia_peermem or use a dma-buf capable driver, or unset "
                      "rdma.gpu_strict to stage through host memory");
  }
  return GpuPath{cuda ? "staging" : "none", false,
                 cuda ? "staged through pinned host buffers (" + facts + ")"
                      : "no CUDA device (" + facts + ")"};
}

Result<GpuPath> probe_gpu(const Config& cfg, ibv_pd* /*pd*/) {
  GpuFacts f = probe_gpu_facts();
  return choose_gpu_path(cfg.get_string("rdma.gpu").value(),
                         cfg.get_bool("rdma.gpu_strict").value(), f);
}

}  // namespace gw::drv::rdma
