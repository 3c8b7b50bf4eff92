/// @file gw_memory.h
/// Memory kinds. gradwire never owns tensors: callers register memory they own.
#pragma once

#include <cstdint>

namespace gw {

enum class MemKind : uint8_t {
  kHost = 0,        ///< pageable host memory
  kCudaHost = 1,    ///< pinned (page-locked) host memory from cudaHostAlloc
  kCudaDevice = 2,  ///< CUDA device memory
};

inline const char* mem_kind_name(MemKind k) {
  switch (k) {
    case MemKind::kHost:
      return "host";
    case MemKind::kCudaHost:
      return "cuda-host";
    case MemKind::kCudaDevice:
      return "cuda";
  }
  return "unknown";
}

}  // namespace gw
