/// @file gw_driver_base.h
/// core::DriverTransport<D, Ep>: the part of a driver's Transport that every driver would
/// otherwise write again (gw_transport_driver.h describes the contract). CRTP: the base calls
/// the driver's progress() and hooks directly, so the CQ's poll costs no virtual call beyond
/// CompletionQueue::poll itself.
/// Thread-safety: as Transport (one driving thread; abort() from any thread).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gw_core.h"
#include "gw_device.h"
#include "gw_driver_cq.h"
#include "gw_slots.h"
#include "gw_staging.h"
#include "gw_transport.h"

namespace gw::core {

/// A host-to-device copy of received bytes, in flight in a receive staging slot.
template <class Ep>
struct RxCopy {
  Ep* ep = nullptr;  // null once the endpoint is gone
  int slot = -1;
  int msg = -1;
};

/// D provides: progress(out), cq_wait_fd(), cq_sleep_poll(out, ms), wake() (abort() from
/// another thread: wake a driving thread asleep), driver_stats(); with device staging
/// make_rx_pool(). It may hide fail_aborted(ep, st) (default: ep->fail(st)) and
/// endpoint_gone(). Ep provides fail(st) and, with staging, rx_copy_done(msg).
template <class D, class Ep>
class DriverTransport : public Transport {
 public:
  const TransportProperties& properties() const final { return props_; }
  const Address& address() const final { return addr_; }
  CompletionQueue& cq() final { return cq_; }
  Result<size_t> post_recv_any(std::span<const RecvRequest> reqs) override {
    return core_.post_recv_any(reqs);
  }
  Result<size_t> cancel_tags(uint64_t mask, uint64_t value) final {
    return core_.cancel_tags(mask, value);
  }
  void accept_tags(uint64_t mask, uint64_t value) final { core_.accept_tags(mask, value); }
  /// Any thread: the core's latch; the first request wakes the driving thread (D::wake()).
  Status abort(std::string_view reason) final {
    if (core_.request_abort(reason)) self().wake();
    return Status();
  }
  /// D's counters, "endpoints" and the core's (add_stats).
  std::map<std::string, uint64_t> stats() const final {
    std::map<std::string, uint64_t> m = self().driver_stats();
    m["endpoints"] = static_cast<uint64_t>(
        eps_.size() - static_cast<size_t>(std::count(eps_.begin(), eps_.end(), nullptr)));
    core_.add_stats(m);
    return m;
  }

  TransportCore& core() { return core_; }
  /// An endpoint is destroyed: it leaves the list, its receive copies finish without it.
  void endpoint_gone(Ep* ep) {
    eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end());
    forget_rx_copies(ep);
  }
  /// Whether a request's buffer is device memory (its region's kind; else, with a GPU, the
  /// pointer's). Without a GPU runtime: one predictable branch.
  bool is_device(const void* buf, const MemoryRegion* mr) const {
    if (mr) return mr->kind() == MemKind::kCudaDevice;
    return gpu_ops_ && buf && gpu_ops_->pointer_kind(buf) == MemKind::kCudaDevice;
  }
  /// The staging pool for receives into device memory, made on first use (D::make_rx_pool).
  Result<StagingPool*> rx_pool() {
    if (!rx_pool_) {
      GW_ASSIGN_OR_RETURN(rx_pool_, self().make_rx_pool());
      rx_copies_.init(rx_pool_->slots());
    }
    return rx_pool_.get();
  }
  StagingPool* rx_pool_now() const { return rx_pool_.get(); }
  /// Finish host-to-device copies of received bytes (in order); a device error fails the
  /// endpoint concerned. `wait`: until one slot is free.
  void poll_rx_copies(bool wait = false) {
    while (!rx_copies_.empty()) {
      RxCopy<Ep> c = rx_copies_.front();
      auto done = rx_pool_->ready(c.slot);
      if (done.ok() && !*done) {
        if (!wait) return;  // copies finish in order: the rest are later
        continue;           // a slot is needed now: the oldest copy is about to finish
      }
      rx_copies_.pop();
      rx_pool_->release(c.slot);
      if (c.ep && !done.ok())
        c.ep->fail(done.status().with_context(props_.name + ": copying received data to the GPU"));
      else if (c.ep)
        c.ep->rx_copy_done(c.msg);
      if (wait) return;
    }
  }
  /// `ep`'s copies in flight finish without it. @return whether it had some.
  bool forget_rx_copies(Ep* ep) {
    bool mine = false;
    for (size_t i = 0; i < rx_copies_.size(); ++i) {
      if (rx_copies_.at(i).ep == ep) {
        rx_copies_.at(i).ep = nullptr;
        mine = true;
      }
    }
    return mine;
  }
  /// The abort path of one endpoint (D may hide it).
  void fail_aborted(Ep* ep, const Status& st) { ep->fail(st); }

 protected:
  DriverTransport() : cq_(this) {}
  /// At open: the GPU runtime's table, or why there is none.
  void open_gpu() {
    if (auto dev = device_ops(); dev.ok())
      gpu_ops_ = *dev;
    else
      dev_why_ = std::string(dev.status().message());
  }
  /// register_memory's common checks. @return InvalidArgument (null with a length),
  /// NotSupported (device memory without a usable GPU runtime).
  Status check_region(const void* addr, size_t length, MemKind kind) const {
    if (addr == nullptr && length > 0) {
      return Status(Code::kInvalidArgument,
                    props_.name + ": register_memory(nullptr, " + std::to_string(length) + ")");
    }
    if (kind == MemKind::kCudaDevice && !gpu_ops_) {
      return Status(Code::kNotSupported, props_.name +
                                             ": cannot register CUDA device memory: " + dev_why_ +
                                             "; register host or pinned (cuda-host) memory");
    }
    return Status();
  }
  /// The end of each progress pass: one load; after abort(), every endpoint and any-source
  /// receive fails with the abort's status.
  void finish_pass() {
    if (core_.take_abort()) [[unlikely]]
      abort_now();
  }
  void abort_now() {
    const Status st = core_.abort_status();
    for (size_t i = 0; i < eps_.size(); ++i)  // a failure may not remove an endpoint
      if (eps_[i]) self().fail_aborted(eps_[i], st);
    core_.fail_any(st.code());
  }

  TransportProperties props_;
  Address addr_;
  DriverCq<D> cq_;
  TransportCore core_;
  std::vector<Ep*> eps_;          // D decides the order; null entries are allowed (gone)
  DeviceOps* gpu_ops_ = nullptr;  // null: no usable GPU (dev_why_ says why)
  std::string dev_why_;
  std::unique_ptr<StagingPool> rx_pool_;
  Ring<RxCopy<Ep>> rx_copies_;

 private:
  D& self() { return static_cast<D&>(*this); }
  const D& self() const { return static_cast<const D&>(*this); }
};

}  // namespace gw::core
