/// @file rdma_gpu.h
/// GPUDirect RDMA detection, probed once when a transport opens: dma-buf (the CUDA driver's
/// cuMemGetHandleForAddressRange, found with dlopen, plus ibv_reg_dmabuf_mr) or the
/// nvidia-peermem kernel module (/sys/module/nvidia_peermem: ibv_reg_mr takes CUDA pointers);
/// otherwise staging through pinned host buffers, or an error when rdma.gpu_strict is set.
/// No CUDA headers or libraries are needed at build time.
/// Thread-safety: none; set-up path only.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "gw_config.h"
#include "gw_status.h"

namespace gw::drv::rdma {

struct GpuPath {
  std::string name;        ///< "dmabuf", "peermem", "staging" or "none"
  bool zero_copy = false;  ///< CUDA memory can be registered directly
  std::string why;         ///< for the log and for NotSupported messages
};

/// What the system offers, as seen from the outside (for tests: pass fake inputs).
struct GpuFacts {
  bool libcuda = false;       ///< libcuda.so.1 loads and cuInit succeeds
  bool dmabuf_symbol = false; ///< it exports cuMemGetHandleForAddressRange
  int cuda_devices = 0;
  bool peermem = false;       ///< nvidia_peermem is loaded
};

/// Probes the machine. Never fails.
GpuFacts probe_gpu_facts();

/// Decides the path from `mode` (auto, dmabuf, peermem, staging) and the facts.
/// @return InvalidArgument for an unknown mode; NotSupported when `mode` names a path the
///         system lacks, or when no direct path exists and `strict` is set.
Result<GpuPath> choose_gpu_path(const std::string& mode, bool strict, const GpuFacts& f);

/// probe_gpu_facts + choose_gpu_path with rdma.gpu / rdma.gpu_strict; logs the outcome.
Result<GpuPath> probe_gpu(const Config& cfg, ibv_pd* pd);

}  // namespace gw::drv::rdma
