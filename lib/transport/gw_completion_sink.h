/// @file gw_completion_sink.h
/// Two pieces of the transport core that hold no policy of a driver: the completion sink
/// (reserve before you accept a request, so a completion is never dropped) and the abort
/// latch (Transport::abort from any thread, carried out by the driving thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "gw_slots.h"
#include "gw_transport.h"

namespace gw::core {

/// Finished requests waiting for CompletionQueue::poll. A request is accepted only after
/// reserve() succeeded (at most `depth` at a time: the caller's back-pressure), and an endpoint
/// reserves one event slot for its failure at connect time (outside `depth`), so push()
/// always has room.
class CompletionSink {
 public:
  void init(size_t depth);
  /// One completion for a request about to be accepted; false when `depth` are outstanding.
  bool reserve() {
    if (requests_ >= depth_) return false;
    ++requests_;
    return true;
  }
  void unreserve(size_t n) { requests_ -= n; }
  /// One endpoint-error event that cannot be refused; grows the ring at connect time so that
  /// push() never lacks room.
  void reserve_event();
  void release_event() { --events_; }
  void push(const Completion& c) {
    if (dn_ < dcap_) {  // straight into the caller's array (open_direct)
      direct_[dn_++] = c;
      release(c);
      return;
    }
    if (ring_.full()) [[unlikely]]
      return overflow(c);
    ring_.push(c);
  }
  /// For a progress pass that drained `n` completions into `out`: while nothing older waits,
  /// further pushes go straight into out[n..] (no copy through the ring).
  void open_direct(std::span<Completion> out, size_t n) {
    if (!ring_.empty()) return;
    direct_ = out.data();
    dn_ = n;
    dcap_ = out.size();
  }
  /// Ends open_direct(); @return how many of `out` are filled (`n` if it was not open).
  size_t close_direct(size_t n) {
    if (direct_) n = dn_;
    direct_ = nullptr;
    dn_ = dcap_ = 0;
    return n;
  }
  /// Move finished requests to `out`, releasing their reservations.
  size_t drain(std::span<Completion> out) {
    size_t k = 0;
    for (; k < out.size() && !ring_.empty(); ++k) {
      out[k] = ring_.front();
      ring_.pop();
      release(out[k]);
    }
    return k;
  }
  /// Drop the completions of a destroyed endpoint (they reach nobody).
  void purge(const Endpoint* ep);

 private:
  void release(const Completion& c) { --(c.op == Op::kEndpointError ? events_ : requests_); }
  [[gnu::cold]] void overflow(const Completion& c);
  void grow(size_t cap);
  Ring<Completion> ring_;
  size_t depth_ = 0, events_ = 0, requests_ = 0;
  Completion* direct_ = nullptr;
  size_t dn_ = 0, dcap_ = 0;
};

/// Transport::abort's state. request() may run on any thread; the driver's hot paths check
/// requested() once per burst (one acquire load) and its progress carries the abort out when
/// take() says so. Thread-safety: request() and requested() any thread; take() the driving one.
class AbortLatch {
 public:
  /// The first call records `st` (Aborted, naming the reason) and returns true; later ones
  /// change nothing and return false.
  bool request(Status st) {
    int expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return false;
    status_ = std::move(st);
    state_.store(2, std::memory_order_release);
    return true;
  }
  /// Whether an abort was requested: posts are refused with status() from now on.
  bool requested() const { return state_.load(std::memory_order_acquire) == 2; }
  /// In progress: true once, when the driver must fail every endpoint with status() now.
  bool take() {
    if (taken_ || !requested()) return false;
    taken_ = true;
    return true;
  }
  /// Valid once requested().
  const Status& status() const { return status_; }

 private:
  std::atomic<int> state_{0};
  Status status_;
  bool taken_ = false;  // the driving thread's
};

}  // namespace gw::core
