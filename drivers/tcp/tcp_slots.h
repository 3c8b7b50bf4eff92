/// @file tcp_slots.h
/// Fixed-capacity containers of the TCP data path: sized once at setup, never allocate after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tcp_wire.h"

namespace gw::drv::tcp {

/// FIFO ring buffer.
template <class T>
class Ring {
 public:
  void init(size_t cap) { v_.assign(cap, T{}); head_ = size_ = 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return v_.size(); }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == v_.size(); }
  T& front() { return v_[head_]; }
  T& at(size_t i) { return v_[(head_ + i) % v_.size()]; }
  void push(const T& x) {
    v_[(head_ + size_) % v_.size()] = x;
    ++size_;
  }
  void pop() {
    head_ = (head_ + 1) % v_.size();
    --size_;
  }
  void clear() { head_ = size_ = 0; }

 private:
  std::vector<T> v_;
  size_t head_ = 0, size_ = 0;
};

/// Ordered list with O(1) erase from the middle, over a fixed pool of nodes.
template <class T>
class SlotList {
 public:
  void init(size_t cap) {
    nodes_.assign(cap, Node{});
    free_.clear();
    for (size_t i = cap; i-- > 0;) free_.push_back(static_cast<int>(i));
    head_ = tail_ = -1;
    size_ = 0;
  }
  bool full() const { return free_.empty(); }
  size_t size() const { return size_; }
  int head() const { return head_; }
  int next(int i) const { return nodes_[i].next; }
  T& operator[](int i) { return nodes_[i].val; }
  /// Appends; caller checks full() first.
  int push_back(const T& v) {
    int i = free_.back();
    free_.pop_back();
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
    free_.push_back(i);
    --size_;
  }

 private:
  struct Node {
    T val{};
    int prev = -1, next = -1;
  };
  std::vector<Node> nodes_;
  std::vector<int> free_;
  int head_ = -1, tail_ = -1;
  size_t size_ = 0;
};

/// One chunk of an outgoing message, queued on one stream.
struct Chunk {
  FrameHeader hdr;
  const uint8_t* payload = nullptr;
  int send_slot = -1;
  size_t done = 0;  // bytes of header + payload already written
};

}  // namespace gw::drv::tcp
