/// @file coll_device.h
/// Collectives on device (CUDA) buffers. The reduction kernels come from a GPU driver that
/// registers them at load time (drivers/cuda), so lib/coll never links CUDA. The transfers go
/// through the Group's transport, which moves device memory itself (GPUDirect) or stages it
/// through pinned host memory (gw_staging.h), and logs which.
/// Thread-safety: as Communicator (one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gw_coll.h"
#include "gw_device.h"

namespace gw::coll {

/// dst = a op b on the device, asynchronously on `stream`; same bytes as reduce().
using DeviceReduceFn = Status (*)(DataType dt, ReduceOp op, void* dst, const void* a,
                                  const void* b, size_t count, uint32_t divisor,
                                  DeviceStream stream);
/// Installs the device reducer (a GPU driver at load time). @return the previous one.
DeviceReduceFn set_device_reduce(DeviceReduceFn fn);
/// The device reducer; null when no GPU driver registered one (see device_reduce_status()).
DeviceReduceFn device_reduce();
/// OK when device_reduce() is set, else NotSupported naming why.
Status device_reduce_status();

/// Whether `p` is device memory (false without a usable GPU).
bool is_device_buffer(const void* p);

/// NotSupported for `what` (a collective other than allreduce) on device buffers.
Status device_unsupported(const char* what);

/// Allreduce of device buffers (send and recv both device memory; send == recv in place):
/// a pipelined ring with the device reducer, run to completion before it returns the handle
/// (wait() then returns its status at once). Other collectives in flight keep progressing.
/// @return the errors of Communicator::allreduce_async; NotSupported (no device reducer, or a
///         transport that cannot move device memory).
Result<CollHandle> device_allreduce_async(Communicator::Impl& im, const void* send, void* recv,
                                          size_t count, DataType dt, ReduceOp op,
                                          const CallOptions& call);

}  // namespace gw::coll
