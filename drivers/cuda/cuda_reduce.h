/// @file cuda_reduce.h
/// Launcher of the CUDA reduction kernels (cuda_reduce.cu), plain C++ so that host code and
/// tests include it without CUDA headers. The device table's reduce() (cuda_device.cc).
/// Thread-safety: as the CUDA runtime (any thread; streams order the work).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gw_device.h"
#include "gw_dtypes.h"
#include "gw_status.h"

namespace gw::drv::cuda {

/// dst[i] = a[i] op b[i] for i < count, launched on `stream` (asynchronous). The same bytes as
/// gw::coll::reduce() on the host; dst may alias a or b exactly. `divisor` as for that.
/// @return InvalidArgument (unknown dtype), the launch error (e.g. no GPU, bad pointer).
Status launch_reduce(DataType dt, ReduceOp op, void* dst, const void* a, const void* b,
                     size_t count, uint32_t divisor, DeviceStream stream);

}  // namespace gw::drv::cuda
