/// @file rdma_gpu.h
/// GPUDirect RDMA detection, probed once when a transport opens: dma-buf (the CUDA driver's
/// cuMemGetHandleForAddressRange, found with dlopen, plus ibv_reg_dmabuf_mr) or the
/// nvidia-peermem kernel module (/sys/module/nvidia_peermem: ibv_reg_mr takes CUDA pointers);
/// otherwise staging through pinned host buffers, or an error when rdma.gpu_strict is set.
/// register_cuda() then registers CUDA device memory on the path chosen; on the staging path
/// the data path copies through pinned buffers instead (rdma_staging.cc). No CUDA headers or
/// libraries are needed at build time (the driver API is reached through dlopen).
/// Thread-safety: none; set-up path only.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "gw_config.h"
#include "gw_status.h"

namespace gw::drv::rdma {

/// cuMemGetHandleForAddressRange(int* fd, CUdeviceptr, size_t, CU_MEM_RANGE_HANDLE_TYPE_*,
/// flags), as libcuda.so.1 exports it; returns a CUresult (0 = success).
using DmabufExportFn = int (*)(void* handle, uint64_t dptr, size_t size, int type,
                               unsigned long long flags);
inline constexpr int kCuMemRangeHandleTypeDmaBufFd = 1;

struct GpuPath {
  std::string name;                        ///< "dmabuf", "peermem", "staging" or "none"
  bool zero_copy = false;                  ///< CUDA memory can be registered directly
  std::string why;                         ///< for the log and for NotSupported messages
  DmabufExportFn dmabuf_export = nullptr;  ///< set on the dmabuf path
};

/// What the system offers, as seen from the outside (for tests: pass fake inputs).
struct GpuFacts {
  bool libcuda = false;        ///< libcuda.so.1 loads and cuInit succeeds
  bool dmabuf_symbol = false;  ///< it exports cuMemGetHandleForAddressRange
  int cuda_devices = 0;
  bool peermem = false;                    ///< nvidia_peermem is loaded
  DmabufExportFn dmabuf_export = nullptr;  ///< the symbol, when present
  bool device_ops = false;  ///< gw::device_ops() is usable: staging can copy device memory
};

/// Probes the machine. Never fails.
GpuFacts probe_gpu_facts();

/// Decides the path from `mode` (auto, dmabuf, peermem, staging) and the facts.
/// @return InvalidArgument for an unknown mode; NotSupported when `mode` names a path the
///         system lacks, or when no direct path exists and `strict` is set.
Result<GpuPath> choose_gpu_path(const std::string& mode, bool strict, const GpuFacts& f);

/// probe_gpu_facts + choose_gpu_path with rdma.gpu / rdma.gpu_strict; logs the outcome.
Result<GpuPath> probe_gpu(const Config& cfg, ibv_pd* pd);

/// How CUDA device memory is registered on `path`: kDmabuf (export a dma-buf fd, then
/// ibv_reg_dmabuf_mr), kPeermem (ibv_reg_mr on the device pointer; nvidia-peermem resolves
/// it) or kRefuse (staging/none: no registration exists for it).
enum class GpuReg : uint8_t { kDmabuf, kPeermem, kRefuse };
GpuReg gpu_registration(const GpuPath& path);

/// The page-aligned range a dma-buf export covers for [addr, addr+len), and addr's offset
/// into it (the dma-buf offset of ibv_reg_dmabuf_mr).
struct DmabufRange {
  uint64_t base = 0, size = 0, offset = 0;
};
DmabufRange dmabuf_range(uint64_t addr, size_t len, uint64_t page);

/// Registers CUDA device memory [addr, addr+len) on `pd` as gpu_registration(path) says.
/// @return NotSupported when the path has no direct registration (the message names
///         rdma.gpu=staging and the missing pieces), SystemError (dma-buf export failed with
///         its CUresult, or the verbs call failed with errno), ResourceExhausted (ENOMEM/EPERM:
///         names `ulimit -l`).
Result<ibv_mr*> register_cuda(ibv_pd* pd, const GpuPath& path, void* addr, size_t len, int access,
                              const std::string& dev);

}  // namespace gw::drv::rdma
