/// @file tcp_slots.h
/// Fixed-capacity containers of the TCP data path: sized once at setup, never allocate after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "tcp_wire.h"

namespace gw::drv::tcp {

/// FIFO ring buffer. Indices wrap by one subtraction, not a division (hot path).
template <class T>
class Ring {
 public:
  void init(size_t cap) { v_.assign(cap, T{}); cap_ = cap; head_ = size_ = 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == cap_; }
  T& front() { return v_[head_]; }
  T& at(size_t i) { return v_[wrap(head_ + i)]; }
  void push(const T& x) {
    v_[wrap(head_ + size_)] = x;
    ++size_;
  }
  void pop() {
    head_ = wrap(head_ + 1);
    --size_;
  }
  void clear() { head_ = size_ = 0; }

 private:
  size_t wrap(size_t i) const { return i >= cap_ ? i - cap_ : i; }  // i < 2 * cap_
  std::vector<T> v_;
  size_t cap_ = 0, head_ = 0, size_ = 0;
};

/// Ordered list with O(1) erase from the middle, over a fixed pool of nodes. Free nodes are
/// chained through `next` (no second container to touch on the hot path).
template <class T>
class SlotList {
 public:
  void init(size_t cap) {
    nodes_.assign(cap, Node{});
    for (size_t i = 0; i < cap; ++i) nodes_[i].next = i + 1 < cap ? static_cast<int>(i + 1) : -1;
    free_ = cap > 0 ? 0 : -1;
    head_ = tail_ = -1;
    size_ = 0;
  }
  bool full() const { return free_ < 0; }
  size_t size() const { return size_; }
  int head() const { return head_; }
  int next(int i) const { return nodes_[i].next; }
  T& operator[](int i) { return nodes_[i].val; }
  /// Appends; caller checks full() first.
  int push_back(const T& v) {
    const int i = free_;
    free_ = nodes_[i].next;
    nodes_[i] = Node{v, tail_, -1};
    (tail_ >= 0 ? nodes_[tail_].next : head_) = i;
    tail_ = i;
    ++size_;
    return i;
  }
  void erase(int i) {
    Node& n = nodes_[i];
    (n.prev >= 0 ? nodes_[n.prev].next : head_) = n.next;
    (n.next >= 0 ? nodes_[n.next].prev : tail_) = n.prev;
    n.next = free_;
    free_ = i;
    --size_;
  }

 private:
  struct Node {
    T val{};
    int prev = -1, next = -1;
  };
  std::vector<Node> nodes_;
  int free_ = -1;  // first free node
  int head_ = -1, tail_ = -1;
  size_t size_ = 0;
};

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
