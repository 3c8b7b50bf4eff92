/// @file gw_progress.h
/// Who drives a transport's data path: an application thread inside a gradwire call, or the
/// transport's progress thread while no call is in it (a trainer computes most of the time,
/// and a kernel-bypass peer must still get its acks, heartbeats and rendezvous answers).
///
/// Hand-over happens at call entry and exit -- one compare-exchange and one store per call,
/// never per message. A layer that drives a transport on behalf of its caller (Communicator,
/// the parameter server) opens a DriveScope in each of its calls and asks the transport for
/// the progress thread (Transport::start_background). Raw users of a Transport that never
/// ask for it drive it alone, as before.
///
/// Thread-safety: enter/exit from any thread (the gate serialises them); scopes of one gate
/// nest on one thread at no cost.
#pragma once

#include <atomic>
#include <cstdint>

namespace gw {

class ProgressGate {
 public:
  /// The calling thread enters a call: waits while a background pass runs (microseconds) or
  /// another thread is inside a call on this transport.
  /// @return false when this thread holds the gate already (a nested call: release nothing).
  bool enter();
  void exit();
  /// The progress thread: take the gate if nobody holds it.
  bool try_background() {
    uint8_t f = kFree;
    return state_.compare_exchange_strong(f, kBackground, std::memory_order_acquire);
  }
  void end_background() { state_.store(kFree, std::memory_order_release); }
  /// Calls entered so far (wraps): the progress thread stays out of the way while it grows.
  uint32_t entries() const { return entries_.load(std::memory_order_relaxed); }

 private:
  enum : uint8_t { kFree, kApp, kBackground };
  std::atomic<uint8_t> state_{kFree};
  std::atomic<uint32_t> entries_{0};  // written by the holder only: a load and a store
};

/// RAII: the calling thread drives the transport of `g` until the scope ends.
class DriveScope {
 public:
  explicit DriveScope(ProgressGate& g) : g_(g.enter() ? &g : nullptr) {}
  ~DriveScope() {
    if (g_) g_->exit();
  }
  DriveScope(const DriveScope&) = delete;
  DriveScope& operator=(const DriveScope&) = delete;

 private:
  ProgressGate* g_;
};

/// transport.progress: who serves peers while no call is inside the transport.
enum class ProgressMode : uint8_t {
  kAuto,    ///< the driver's choice (TransportProperties::progress_thread)
  kThread,  ///< a progress thread per transport
  kCaller,  ///< nobody: only the application's calls (a rank computing long looks dead)
};

}  // namespace gw
