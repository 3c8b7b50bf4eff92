/// @file gw_device.h
/// Accelerator memory behind a small operations table. A GPU driver (drivers/cuda) fills the
/// table when the library loads (GW_REGISTER_DEVICE_OPS), so the core libraries never link
/// CUDA and a build without it still works: device_ops() then says why there is no device.
/// The table also carries the device's reduction kernels (reduce()), which lib/coll calls.
/// Streams and events are opaque handles (cudaStream_t / cudaEvent_t for CUDA).
/// Thread-safety: the table's functions may be called from any thread, as the CUDA runtime's;
/// the RAII owners below are not shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "gw_dtypes.h"
#include "gw_memory.h"
#include "gw_status.h"

namespace gw {

using DeviceStream = void*;  ///< nullptr: the device's default stream
using DeviceEvent = void*;

/// A dma-buf file descriptor that covers [addr, addr + length) of device memory from `offset`
/// in the buffer (what ibv_reg_dmabuf_mr takes). Closes the fd when destroyed.
class DmaBuf {
 public:
  DmaBuf() = default;
  DmaBuf(int fd, uint64_t offset, size_t length) : fd_(fd), offset_(offset), length_(length) {}
  DmaBuf(DmaBuf&& o) noexcept { *this = std::move(o); }
  DmaBuf& operator=(DmaBuf&& o) noexcept;
  DmaBuf(const DmaBuf&) = delete;
  DmaBuf& operator=(const DmaBuf&) = delete;
  ~DmaBuf();
  int fd() const { return fd_; }
  uint64_t offset() const { return offset_; }
  size_t length() const { return length_; }

 private:
  int fd_ = -1;
  uint64_t offset_ = 0;
  size_t length_ = 0;
};

/// Operations on one accelerator's memory. Every function returns NotSupported (with the
/// reason) when available() is not OK; errors carry the runtime's message and what to do.
class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  /// "cuda".
  virtual const char* name() const = 0;
  /// OK when a device is usable; else NotSupported/Unavailable saying why (no GPU, no driver).
  /// Probed once; cheap afterwards.
  virtual Status available() = 0;
  /// "NVIDIA H100 80GB HBM3 (device 0, sm_90)", for logs.
  virtual std::string describe() = 0;

  /// @return ResourceExhausted (out of device memory), NotSupported.
  virtual Result<void*> alloc_device(size_t bytes) = 0;
  virtual void free_device(void* p) = 0;
  /// Page-locked host memory that the device copies to and from asynchronously.
  /// @return ResourceExhausted, NotSupported.
  virtual Result<void*> alloc_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* p) = 0;
  /// kCudaDevice, kCudaHost, or kHost for memory the device runtime does not know. Cheap
  /// (no allocation); kHost whenever available() is not OK.
  virtual MemKind pointer_kind(const void* p) = 0;

  /// @return NotSupported, Internal.
  virtual Result<DeviceStream> create_stream() = 0;
  virtual void destroy_stream(DeviceStream s) = 0;
  virtual Result<DeviceEvent> create_event() = 0;
  virtual void destroy_event(DeviceEvent e) = 0;
  /// Copy `n` bytes in any direction (host, pinned, device), ordered on `s`.
  /// @return InvalidArgument (bad pointer), Internal (runtime error).
  virtual Status copy_async(void* dst, const void* src, size_t n, DeviceStream s) = 0;
  /// Record `e` on `s`; query() says whether the work before it finished.
  virtual Status record(DeviceEvent e, DeviceStream s) = 0;
  /// @return true when done, false when still running, or the error the work ended with.
  virtual Result<bool> query(DeviceEvent e) = 0;
  /// Wait for all work on `s`.
  virtual Status synchronize(DeviceStream s) = 0;
  /// dma-buf of device memory, for GPUDirect RDMA registration (ibv_reg_dmabuf_mr).
  /// @return NotSupported (driver or kernel without dma-buf), InvalidArgument.
  virtual Result<DmaBuf> export_dmabuf(void* addr, size_t length) = 0;
  /// Whether reduce() has kernels (the collectives on device buffers need them).
  virtual bool can_reduce() const { return false; }
  /// dst = a op b for `count` elements, asynchronously on `s`; the same bytes as the host
  /// kernels (gw::coll::reduce), dst may alias a or b exactly, `divisor` as there.
  /// @return NotSupported (no kernels), InvalidArgument, the launch error.
  virtual Status reduce(DataType dt, ReduceOp op, void* dst, const void* a, const void* b,
                        size_t count, uint32_t divisor, DeviceStream s) {
    (void)dt, (void)op, (void)dst, (void)a, (void)b, (void)count, (void)divisor, (void)s;
    return Status(Code::kNotSupported, std::string(name()) + " has no reduction kernels");
  }
};

/// Installs the table of a driver (called at load time by GW_REGISTER_DEVICE_OPS); a test may
/// install its own and restore the previous one. @return the previous table (may be null).
DeviceOps* set_device_ops(DeviceOps* ops);
/// The usable device table, or NotSupported naming why: no GPU driver compiled in (with the
/// build's reason), or the driver's available() error (e.g. no GPU on this machine).
Result<DeviceOps*> device_ops();
/// pointer_kind() of the usable table; kHost when there is none. Cheap after the first call.
MemKind memory_kind_of(const void* p);

/// Move-only owner of memory from one of the table's allocators, freed through the same table.
template <Result<void*> (DeviceOps::*Alloc)(size_t), void (DeviceOps::*Free)(void*)>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  /// @return the allocator's errors and device_ops()'s.
  static Result<OwnedMemory> create(size_t bytes) {
    GW_ASSIGN_OR_RETURN(DeviceOps * ops, device_ops());
    GW_ASSIGN_OR_RETURN(void* p, (ops->*Alloc)(bytes));
    OwnedMemory m;
    m.ops_ = ops;
    m.p_ = static_cast<uint8_t*>(p);
    m.n_ = bytes;
    return m;
  }
  OwnedMemory(OwnedMemory&& o) noexcept { *this = std::move(o); }
  OwnedMemory& operator=(OwnedMemory&& o) noexcept {
    if (this != &o) {
      if (p_) (ops_->*Free)(p_);
      ops_ = o.ops_;
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  ~OwnedMemory() {
    if (p_) (ops_->*Free)(p_);
  }
  uint8_t* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  DeviceOps* ops_ = nullptr;
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

/// Device memory (cudaMalloc) and pinned host memory (cudaHostAlloc).
using DeviceBuffer = OwnedMemory<&DeviceOps::alloc_device, &DeviceOps::free_device>;
using PinnedBuffer = OwnedMemory<&DeviceOps::alloc_pinned, &DeviceOps::free_pinned>;

/// Move-only owner of a stream.
class StreamHandle {
 public:
  StreamHandle() = default;
  static Result<StreamHandle> create();
  StreamHandle(StreamHandle&& o) noexcept { *this = std::move(o); }
  StreamHandle& operator=(StreamHandle&& o) noexcept;
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  ~StreamHandle();
  DeviceStream get() const { return s_; }
  DeviceOps* ops() const { return ops_; }

 private:
  DeviceOps* ops_ = nullptr;
  DeviceStream s_ = nullptr;
};

}  // namespace gw

/// In a GPU driver: `GW_REGISTER_DEVICE_OPS(cuda, &the_table);` installs it at load time.
#define GW_REGISTER_DEVICE_OPS(name, ops_ptr) \
  static const bool gw_device_ops_##name = (::gw::set_device_ops(ops_ptr), true)
