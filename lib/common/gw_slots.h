/// @file gw_slots.h
/// Fixed-capacity containers of the drivers' data paths: sized once at setup, never allocate
/// after.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace gw {

/// FIFO ring buffer. Indices wrap by one subtraction, not a division (hot path).
template <class T>
class Ring {
 public:
  void init(size_t cap) {
    v_.assign(cap, T{});
    cap_ = cap;
    head_ = size_ = 0;
  }
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
    nodes_.clear();  // not assign(): T may be move-only
    nodes_.resize(cap);
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
  const T& operator[](int i) const { return nodes_[i].val; }
  /// Appends; caller checks full() first.
  template <class U = T>
  int push_back(U&& v) {
    const int i = free_;
    free_ = nodes_[i].next;
    nodes_[i] = Node{std::forward<U>(v), tail_, -1};
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

}  // namespace gw
