/// @file gw_time.h
/// Clocks and deadlines. Every blocking call in gradwire takes a Deadline or a timeout.
#pragma once

#include <chrono>
#include <cstdint>

namespace gw {

using Clock = std::chrono::steady_clock;
using Nanos = std::chrono::nanoseconds;
using Millis = std::chrono::milliseconds;

/// A point in time after which a blocking call gives up with Code::kTimeout.
class Deadline {
 public:
  explicit Deadline(Nanos timeout) : at_(Clock::now() + timeout) {}
  /// `timeout` after `start` (a clock reading the caller has already taken).
  Deadline(Clock::time_point start, Nanos timeout) : at_(start + timeout) {}
  static Deadline after_ms(int64_t ms) { return Deadline(Millis(ms)); }

  bool expired() const { return Clock::now() >= at_; }
  /// Time left, never negative.
  Nanos remaining() const {
    auto left = at_ - Clock::now();
    return left.count() > 0 ? std::chrono::duration_cast<Nanos>(left) : Nanos(0);
  }
  /// Time left in whole milliseconds rounded up, for poll()/epoll_wait().
  int remaining_ms() const {
    auto ns = remaining().count();
    return static_cast<int>((ns + 999'999) / 1'000'000);
  }
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
};

inline uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<Nanos>(Clock::now().time_since_epoch()).count());
}

}  // namespace gw
