/// @file tcp_slots.h
/// The TCP data path's own fixed-capacity pieces (Ring and SlotList are in gw_slots.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "gw_slots.h"
#include "tcp_wire.h"

namespace gw::drv::tcp {

/// Buffers of unexpected messages, kept after use so a steady stream of early arrivals does not
/// allocate: a freed buffer is reused for any message of at least half its size. Holds at most
/// kMax buffers and never more bytes than the unexpected-message budget.
class BufferCache {
 public:
  struct Buf {
    std::unique_ptr<uint8_t[]> p;
    size_t cap = 0;
  };
  Buf get(size_t len) {
    for (size_t i = 0; i < n_; ++i) {
      if (bufs_[i].cap >= len && bufs_[i].cap / 2 <= len) {
        Buf b = std::move(bufs_[i]);
        bufs_[i] = std::move(bufs_[--n_]);
        bytes_ -= b.cap;
        return b;
      }
    }
    return Buf{std::unique_ptr<uint8_t[]>(new (std::nothrow) uint8_t[len]), len};
  }
  void put(Buf b, size_t budget) {
    if (!b.p) return;
    if (n_ == kMax || bytes_ + b.cap > budget) {  // evict the oldest to make room
      if (n_ == 0 || b.cap > budget) return;
      bytes_ -= bufs_[0].cap;
      bufs_[0] = std::move(bufs_[--n_]);
    }
    bytes_ += b.cap;
    bufs_[n_++] = std::move(b);
  }

 private:
  static constexpr size_t kMax = 16;
  Buf bufs_[kMax];
  size_t n_ = 0, bytes_ = 0;
};

/// One chunk of an outgoing message, queued on one stream.
struct Chunk {
  FrameHeader hdr;
  const uint8_t* payload = nullptr;  // null for device memory until its staging copy is done
  int send_slot = -1;
  size_t done = 0;  // bytes of header + payload already written
  const uint8_t* dev = nullptr;      // device memory to stage (drivers/tcp/tcp_staging.cc)
  int stage_slot = -1;               // its slot in the endpoint's send pool
};

}  // namespace gw::drv::tcp
