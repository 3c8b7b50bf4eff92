/// @file coll_device.h
/// Collectives on device (CUDA) buffers. The reduction kernels come with the GPU driver's device
/// table (DeviceOps::reduce, drivers/cuda), so lib/coll never links CUDA. The transfers go
/// through the Group's transport, which moves device memory itself (GPUDirect) or stages it
/// through pinned host memory (gw_staging.h), and logs which.
/// Thread-safety: as Communicator (one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gw_coll.h"
#include "gw_device.h"

namespace gw::coll {

struct Task;

/// OK when the device table has reduction kernels (DeviceOps::can_reduce), else why not.
Status device_reduce_status();

/// Whether `p` is device memory (false without a usable GPU).
bool is_device_buffer(const void* p);

/// Copy n bytes between any kinds of memory and wait for it (setup and completion paths of
/// device calls only). @return device_ops()'s errors, the runtime's.
Status copy_sync(void* dst, const void* src, size_t n);

// Device-buffer calls (coll_device_api.cc). Each keeps every rank's engine choice the same as
// for host buffers of that size, so a rank that passed the other kind of memory is caught by
// the call descriptor (Desc::device), not left waiting. Errors: those of the host calls, and
// NotSupported (no device reducer, a transport that cannot move device memory).

/// Allreduce with `recv` on the device (`send` anywhere; send == recv in place). Up to
/// coll.device_host_max_bytes, and whenever recursive doubling is chosen: one device-to-host
/// copy into a pinned slot, the host engines, one host-to-device copy when it completes.
/// Larger: the device ring (coll_device_ring.cc), run to completion before this returns (wait()
/// then returns its status at once); other collectives in flight keep progressing.
Result<CollHandle> device_allreduce_async(Communicator::Impl& im, const void* send, void* recv,
                                          size_t count, DataType dt, ReduceOp op,
                                          const CallOptions& call);
/// Fused bucket of device tensors (`total` elements), reduced as one allreduce of that size.
Result<CollHandle> device_bucket_async(Communicator::Impl& im, std::span<const TensorRef> bucket,
                                       size_t total, DataType dt, ReduceOp op,
                                       const CallOptions& call);
/// Reduce-scatter of device buffers: the device ring's reduce-scatter phase, run to completion.
Result<CollHandle> device_reduce_scatter_async(Communicator::Impl& im, const void* send, void* recv,
                                               size_t recv_count, DataType dt, ReduceOp op,
                                               const CallOptions& call);

/// The device ring on op (setup done by begin()): allreduce of `send` into `recv` (count
/// elements), or with `rs_out` set, reduce-scatter: this rank's reduced block goes to rs_out
/// and `recv` is a device work buffer of count elements. Returns when it finished.
Status run_device_ring(Communicator::Impl& im, Task& op, const void* send, void* recv,
                       void* rs_out);

/// A host-staged device call finished (called by maybe_complete): copy the result to the
/// device (dev_out, or each device tensor of a bucket) and give its pinned slot back.
Status device_complete(Communicator::Impl& im, Task& op);
/// Give op's pinned slot back (a call that failed, or its Task being reused).
void release_stage(Communicator::Impl& im, Task& op);

}  // namespace gw::coll
