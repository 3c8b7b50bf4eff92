/// @file tcp_transport.h
/// Kernel-TCP transport: non-blocking sockets under one epoll set; several streams per peer,
/// large messages striped across them; payload read straight into the posted buffer; unexpected
/// messages buffered up to tcp.unexpected_bytes, beyond which the sender is back-pressured by
/// not reading its stream.
/// Thread-safety: none (one thread drives a transport and its endpoints).
#pragma once

#include <sys/epoll.h>

#include <map>
#include <memory>
#include <vector>

#include "gw_config.h"
#include "gw_core.h"
#include "gw_listener.h"
#include "gw_liveness.h"
#include "gw_socket.h"
#include "gw_staging.h"
#include "gw_transport.h"
#include "tcp_options.h"
#include "tcp_slots.h"
#include "tcp_stream.h"
#include "tcp_tls.h"
#include "tcp_wire.h"

namespace spdlog {
class logger;
}

namespace gw::drv::tcp {

class TcpTransport;
class TcpEndpoint;

/// A host-to-device copy of a received slot, in flight.
struct RxCopy {
  TcpEndpoint* ep = nullptr;  // null once the endpoint is gone
  int slot = -1;
  int msg = -1;
};

class TcpCq final : public CompletionQueue {
 public:
  explicit TcpCq(TcpTransport* t) : t_(t) {}
  Result<size_t> poll(std::span<Completion> out) override;
  int wait_fd() const override;
  Result<size_t> sleep_poll(std::span<Completion> out, int timeout_ms) override;

 private:
  TcpTransport* t_;
};

class TcpTransport final : public Transport {
 public:
  static Result<std::unique_ptr<Transport>> open(const Config& cfg);
  ~TcpTransport() override;

  const TransportProperties& properties() const override { return props_; }
  const Address& address() const override { return addr_; }
  Result<std::unique_ptr<Endpoint>> connect(const ConnectParams& p, Deadline deadline) override;
  Result<MemoryRegion> register_memory(void* addr, size_t length, MemKind kind) override;
  Result<size_t> post_recv_any(std::span<const RecvRequest> reqs) override;
  CompletionQueue& cq() override { return cq_; }
  std::map<std::string, uint64_t> stats() const override;
  /// Any thread: the core's latch, then a write to wake_ wakes a progress asleep in epoll.
  Status abort(std::string_view reason) override;
  Result<size_t> cancel_tags(uint64_t mask, uint64_t value) override {
    return core_.cancel_tags(mask, value);
  }
  void accept_tags(uint64_t mask, uint64_t value) override { core_.accept_tags(mask, value); }

  // --- used by TcpEndpoint and the data path ---
  /// Progress; `timeout_ms` > 0 sleeps in epoll_wait first. With timeout 0 and at most
  /// kDirectStreams streams, the sockets are read directly (one recv each, as a busy-polling
  /// socket program would) instead of asking epoll first.
  /// After kUnwatchAfter such polls in a row with nothing to send, the streams also leave the
  /// epoll set: an arriving packet then no longer runs epoll's callback under its lock (busy
  /// ping-pong 3-4 % faster, docs/bench-tcp.md). They rejoin before any sleep (a progress with a
  /// timeout, or wait_fd(), as the rdma driver arms its channel there) and any send.
  Result<size_t> progress(std::span<Completion> out, int timeout_ms = 0);
  static constexpr size_t kDirectStreams = 2;
  static constexpr uint32_t kUnwatchAfter = 1024;
  /// Every stream into the epoll set (true) or out of it.
  void watch_streams(bool on);
  int epoll_fd() const { return epfd_.get(); }
  const Options& opts() const { return opts_; }
  const TlsContext* tls() const { return tls_.get(); }
  core::TransportCore& core() { return core_; }
  void endpoint_gone(TcpEndpoint* ep);
  /// Whether a request's buffer is device memory (its region's kind, else asked of the
  /// device runtime when there is a GPU).
  bool is_device(const void* buf, const MemoryRegion* mr) const {
    if (mr) return mr->kind() == MemKind::kCudaDevice;
    return dev_ && buf && dev_->pointer_kind(buf) == MemKind::kCudaDevice;
  }
  /// The staging pool for receives into device memory, made on first use (logs the path).
  Result<StagingPool*> rx_pool();
  /// Make a staging pool (send side: one per endpoint; receive side: this transport's).
  Result<std::unique_ptr<StagingPool>> make_pool(const std::string& owner);
  /// Finish host-to-device copies of received slots. False if the device failed (the
  /// endpoints concerned are failed).
  void poll_rx_copies();
  StagingPool* rx_pool_now() const { return rx_pool_.get(); }

  static constexpr size_t kDrainSize = 64 * 1024;
  struct Counters {
    uint64_t bytes_sent = 0, bytes_received = 0, msgs_sent = 0, rx_stalls = 0;
    uint64_t protocol_errors = 0, tls_handshakes = 0;
    uint64_t staged_tx_bytes = 0, staged_rx_bytes = 0;
    uint64_t unwatches = 0;  // times the streams left the epoll set
    uint64_t heartbeats_sent = 0, heartbeats_received = 0, peer_timeouts = 0;
  };

 private:
  friend class TcpEndpoint;
  // State the endpoints and the data path share (friends: the same driver's classes).
  Ring<RxCopy> rx_copies_;
  std::unique_ptr<uint8_t[]> drain_;  // scratch for payload nobody can take
  Counters counters_;
  std::shared_ptr<spdlog::logger> log_;

  TcpTransport() : cq_(this) {}
  Status init(const Config& cfg);
  Status wait_events(int timeout_ms);
  /// The driving thread carries out Transport::abort: every endpoint fails with it.
  void abort_now();
  /// Heartbeats and the peer timeout of every endpoint, every ~10 ms (tcp_liveness.cc).
  void liveness();
  Result<std::vector<Parked>> take_parked(uint64_t key);
  /// One handshake step of every parked TLS stream. @return whether some still run.
  bool drive_parked_tls();
  /// The dialling side's handshakes, the transport driven meanwhile.
  Result<std::vector<SslPtr>> client_tls(const std::vector<Fd>& fds, const std::string& who,
                                         Deadline deadline);

  Options opts_;
  TransportProperties props_;
  Address addr_;
  SockAddr local_;
  Fd epfd_;
  core::HelloListener listener_;
  PollItem listen_item_{PollItem::kListener};
  Fd wake_;  // eventfd in the epoll set: abort() wakes a sleeping progress
  PollItem wake_item_{PollItem::kWake};
  TcpCq cq_;
  core::TransportCore core_;
  std::vector<TcpEndpoint*> eps_;
  std::multimap<uint64_t, Parked> parked_;       // key -> HELLOed sockets
  std::map<uint64_t, std::string> tls_refused_;  // key -> why a parked handshake failed
  bool parked_tls_ = false;                      // some parked TLS handshake still runs
  std::vector<epoll_event> events_;
  uint32_t polls_ = 0;
  core::LivenessTick live_tick_;
  uint32_t direct_polls_ = 0;  // direct polls in a row
  bool unwatched_ = false;     // the streams are out of the epoll set
  DeviceOps* dev_ = nullptr;   // null: no usable GPU (dev_why_ says why)
  std::string dev_why_;
  std::unique_ptr<StagingPool> rx_pool_;
  std::unique_ptr<TlsContext> tls_;  // tcp.tls=on
};

}  // namespace gw::drv::tcp
