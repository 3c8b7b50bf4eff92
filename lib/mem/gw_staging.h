/// @file gw_staging.h
/// Staging of device memory for transports that cannot touch it (TCP, DPDK, RDMA without
/// GPUDirect): a fixed pool of pinned host slots, each with its own event, and one copy stream
/// per direction so device→host and host→device copies overlap each other and the network.
///
/// Send side: acquire() a slot, stage_out() a piece of device memory into it, and hand the slot
/// to the wire once ready() says the copy finished; release() it when the wire is done with it.
/// Receive side: acquire(), fill data() from the wire, stage_in() to the device address, and
/// release() once ready(). Copies on one direction finish in the order they were started.
/// acquire() returning -1 is the back-pressure: stop taking work until a slot is released.
///
/// Adopting it in a driver (as drivers/tcp does): create a pool per endpoint on the first
/// device-memory request, cut device messages into pieces of chunk_bytes(), and keep a slot
/// index next to each piece. Nothing allocates after create().
/// Thread-safety: none; one thread drives a pool (its transport's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gw_device.h"

namespace gw {

class StagingPool {
 public:
  struct Options {
    size_t chunk_bytes = 512 * 1024;  ///< bytes per slot
    uint32_t slots = 8;               ///< slots in the pool
  };
  /// @param owner for error messages, e.g. "tcp endpoint rank 2".
  /// @return InvalidArgument (zero sizes), ResourceExhausted (pinned memory), NotSupported.
  static Result<std::unique_ptr<StagingPool>> create(DeviceOps* ops, const Options& opts,
                                                     std::string owner);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  size_t chunk_bytes() const { return chunk_; }
  uint32_t slots() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t free_slots() const { return static_cast<uint32_t>(free_.size()); }

  /// A free slot, or -1 when all are in use.
  int acquire();
  /// The slot's pinned buffer (chunk_bytes()).
  uint8_t* data(int slot) const { return slots_[static_cast<size_t>(slot)].buf; }
  /// All slots are one pinned block [base(), base() + bytes()): register it once with a NIC
  /// (ibv_reg_mr, DPDK external memory) to send from and receive into the slots directly.
  uint8_t* base() const { return slots_.empty() ? nullptr : slots_[0].buf; }
  size_t bytes() const { return chunk_ * slots_.size(); }
  /// Start copying n <= chunk_bytes() bytes from device memory into the slot.
  /// @return InvalidArgument (n too big), the runtime's error.
  Status stage_out(int slot, const void* dev_src, size_t n);
  /// Start copying the slot's first n bytes to device memory.
  Status stage_in(int slot, void* dev_dst, size_t n);
  /// Whether the slot's last copy finished (true also when none was started).
  Result<bool> ready(int slot);
  /// Return the slot to the pool. Its copy must have finished (ready() was true).
  void release(int slot);
  /// Synchronous host→device copy through the in-direction stream (rare paths only, e.g. a
  /// message that was buffered before its device receive was posted).
  Status copy_in_sync(void* dev_dst, const void* src, size_t n);
  /// Synchronous device→host copy through the out-direction stream (small messages).
  Status copy_out_sync(void* dst, const void* dev_src, size_t n);
  /// Waits for every copy started so far (an endpoint that failed, before its caller may
  /// free the device buffers the copies touch).
  Status drain();

  uint64_t bytes_out() const { return bytes_out_; }
  uint64_t bytes_in() const { return bytes_in_; }

 private:
  StagingPool() = default;
  struct Slot {
    uint8_t* buf = nullptr;
    DeviceEvent ev = nullptr;
    bool copying = false;
  };
  Status start(int slot, void* dst, const void* src, size_t n, DeviceStream s, bool out);

  DeviceOps* ops_ = nullptr;
  std::string owner_;
  size_t chunk_ = 0;
  DeviceStream out_s_ = nullptr, in_s_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<int> free_;
  uint64_t bytes_out_ = 0, bytes_in_ = 0;
};

}  // namespace gw
