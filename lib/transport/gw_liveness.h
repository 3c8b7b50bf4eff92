/// @file gw_liveness.h
/// Heartbeat bookkeeping a driver keeps per endpoint (tcp, rdma): while a rank's progress
/// thread runs it sends each peer a heartbeat every heartbeat_ms, flagged "my thread runs"; a
/// peer that said so and then sent nothing for peer_timeout_ms while requests wait on it is
/// stopped or hung. The driver carries the heartbeats (its own frame or channel); this says
/// when to send one and when a silence is too long. dpdk's acks play the same part.
/// Thread-safety: none (the thread driving the transport).
#pragma once

#include <cstdint>
#include <string>

namespace gw::core {

/// When a transport's liveness pass is due: every 10 ms, or at once when its progress thread
/// starts or stops (`live`: Transport::background()).
class LivenessTick {
 public:
  static constexpr uint64_t kCheckNs = 10'000'000;
  bool due(bool live, uint64_t now) {
    if (live == live_ && now - last_ < kCheckNs) return false;
    last_ = now;
    live_ = live;
    return true;
  }
  /// background() at the last pass: a driver's poll loop passes at once when it changed.
  bool live() const { return live_; }

 private:
  uint64_t last_ = 0;
  bool live_ = false;
};

class PeerLiveness {
 public:
  /// Something came from the peer (any frame or heartbeat): it runs.
  void heard() { heard_ = true; }
  /// The peer's flag in its last heartbeat: its progress thread runs (it sends them).
  void peer_says(bool live) { peer_live_ = live; }
  /// At each pass: whether the peer promised heartbeats, requests wait on it (`pending`) and
  /// nothing came for more than `timeout_ns`.
  bool silent(uint64_t now, bool pending, uint64_t timeout_ns) {
    if (heard_ || last_rx_ == 0) {
      heard_ = false;
      last_rx_ = now;
    }
    return peer_live_ && pending && now - last_rx_ > timeout_ns;
  }
  uint64_t silent_ms(uint64_t now) const { return (now - last_rx_) / 1'000'000; }
  /// What the endpoint fails with when silent(): `who` names the peer ("tcp: peer rank 3
  /// (addr)"), `key` the timeout's configuration key.
  std::string silence(uint64_t now, const std::string& who, uint64_t every_ns,
                      const char* key) const {
    return who + " sent nothing for " + std::to_string(silent_ms(now)) +
           " ms although its progress thread sends a heartbeat every " +
           std::to_string(every_ns / 1'000'000) + " ms (" + key +
           "): its process is stopped (SIGSTOP, a debugger) or hung — check it";
  }
  /// A heartbeat is due: our thread started or stopped, or `every_ns` passed while it runs.
  bool beat_due(uint64_t now, bool live, uint64_t every_ns) const {
    return live != live_sent_ || (live && now - last_beat_ >= every_ns);
  }
  void beat_sent(uint64_t now, bool live) {
    last_beat_ = now;
    live_sent_ = live;
  }

 private:
  bool heard_ = false, peer_live_ = false, live_sent_ = false;
  uint64_t last_rx_ = 0, last_beat_ = 0;
};

}  // namespace gw::core
