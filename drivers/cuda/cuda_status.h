/// @file cuda_status.h
/// cudaError_t -> gw::Status with the runtime's name and text and what to do about it.
/// Thread-safety: pure functions.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gw_status.h"

namespace gw::drv::cuda {

/// "cudaErrorMemoryAllocation: out of memory".
inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

/// OK, or an error naming `what`. Clears the runtime's last-error slot (non-sticky errors).
inline Status check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status();
  (void)cudaGetLastError();
  Code code = Code::kInternal;
  const char* hint = "check the GPU with nvidia-smi; CUDA_LAUNCH_BLOCKING=1 pins down the call";
  switch (e) {
    case cudaErrorMemoryAllocation:
      code = Code::kResourceExhausted;
      hint = "free device or pinned memory, or use smaller buffers";
      break;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
      code = Code::kInvalidArgument;
      hint = "the pointer is not device, pinned or host memory of this process";
      break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
      code = Code::kNotSupported;
      hint = "no usable GPU: install the NVIDIA driver matching this CUDA runtime";
      break;
    default:
      break;
  }
  return Status(code, "cuda: " + what + " failed: " + cuda_error_text(e) + " (" + hint + ")");
}

}  // namespace gw::drv::cuda
