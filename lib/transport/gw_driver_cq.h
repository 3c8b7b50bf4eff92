/// @file gw_driver_cq.h
/// core::DriverCq<D>: the CompletionQueue of a driver's Transport (gw_driver_base.h), whose
/// calls go straight to the driver's own (CRTP: no virtual call beyond CompletionQueue's).
/// Thread-safety: as CompletionQueue (the transport's driving thread).
#pragma once

#include <span>

#include "gw_transport.h"

namespace gw::core {

/// The CQ of driver D: poll() is D::progress(out); wait_fd() and sleep_poll() are D's
/// cq_wait_fd() and cq_sleep_poll().
/// Holds the Transport and casts to D only when called: made in the base's constructor, before
/// D exists, a D* then would be a cast to an object not yet constructed (UBSan's vptr check).
template <class D>
class DriverCq final : public CompletionQueue {
 public:
  explicit DriverCq(Transport* t) : t_(t) {}
  Result<size_t> poll(std::span<Completion> out) override { return d()->progress(out); }
  int wait_fd() const override { return d()->cq_wait_fd(); }
  Result<size_t> sleep_poll(std::span<Completion> out, int timeout_ms) override {
    return d()->cq_sleep_poll(out, timeout_ms);
  }
  /// CompletionQueue's own sleep on wait_fd(), for a driver that only adds to it.
  Result<size_t> plain_sleep_poll(std::span<Completion> out, int timeout_ms) {
    return CompletionQueue::sleep_poll(out, timeout_ms);
  }

 private:
  D* d() const { return static_cast<D*>(t_); }
  Transport* t_;
};

}  // namespace gw::core
