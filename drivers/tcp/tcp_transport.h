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
#include "gw_driver_base.h"
#include "gw_listener.h"
#include "gw_liveness.h"
#include "gw_socket.h"
#include "gw_staging.h"
#include "gw_transport.h"
#include "tcp_counters.h"
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

using RxCopy = core::RxCopy<TcpEndpoint>;

class TcpTransport final : public core::DriverTransport<TcpTransport, TcpEndpoint> {
 public:
  static Result<std::unique_ptr<Transport>> open(const Config& cfg);
  ~TcpTransport() override;

  Result<std::unique_ptr<Endpoint>> connect(const ConnectParams& p, Deadline deadline) override;
  Result<MemoryRegion> register_memory(void* addr, size_t length, MemKind kind) override;

  // --- DriverTransport's hooks ---
  /// abort() from another thread: a write to wake_ wakes a progress asleep in epoll.
  void wake();
  std::map<std::string, uint64_t> driver_stats() const;
  /// Whoever sleeps on the epoll fd must hear the streams: they rejoin the set first.
  int cq_wait_fd() {
    watch_streams(true);
    return epoll_fd();
  }
  Result<size_t> cq_sleep_poll(std::span<Completion> out, int timeout_ms) {
    return progress(out, timeout_ms);
  }
  /// Receives into device memory: a pool of opts().staging slots.
  Result<std::unique_ptr<StagingPool>> make_rx_pool() {
    return make_pool("receives into device memory");
  }

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
  /// Make a staging pool (send side: one per endpoint; receive side: this transport's).
  Result<std::unique_ptr<StagingPool>> make_pool(const std::string& owner);

  static constexpr size_t kDrainSize = 64 * 1024;
  static constexpr size_t kMaxLinks = 6;  // what an Address holds (IPv6)
  /// tcp.ifaces: link l's local address (port 0); empty with one link.
  const std::vector<SockAddr>& links() const { return links_; }
  using Counters = TcpCounters;

 private:
  friend class TcpEndpoint;
  // State the endpoints and the data path share (friends: the same driver's classes).
  std::unique_ptr<uint8_t[]> drain_;  // scratch for payload nobody can take
  Counters counters_;
  std::shared_ptr<spdlog::logger> log_;

  TcpTransport() = default;
  Status init(const Config& cfg);
  /// tcp.ifaces: every link's local address (links_), the first one as `first`.
  Status choose_links(const Settings& set, LocalChoice* first);
  Status make_address();
  // init's steps after the options and addresses: the listener, the epoll set, properties.
  Status init_listener();
  Status init_epoll();
  void init_props(const std::string& iface, const std::string& ifaces);
  /// Streams that join a connected endpoint (kHelloJoin) go to it (tcp_links.cc).
  void take_joins();
  Status wait_events(int timeout_ms);
  void serve_streams();
  /// Heartbeats and the peer timeout of every endpoint, every ~10 ms (tcp_liveness.cc).
  void liveness();
  Result<std::vector<Parked>> take_parked(uint64_t key);
  /// One handshake step of every parked TLS stream. @return whether some still run.
  bool drive_parked_tls();
  struct PeerStreams;
  Status dial_streams(const ConnectParams& p, const std::vector<SockAddr>& remotes,
                      const std::string& who, Deadline deadline, PeerStreams* out);
  Status await_streams(const ConnectParams& p, const std::string& peer, Deadline deadline,
                       PeerStreams* out);
  /// The dialling side's handshakes, the transport driven meanwhile.
  Result<std::vector<SslPtr>> client_tls(const std::vector<Fd>& fds, const std::string& who,
                                         Deadline deadline);

  Options opts_;
  SockAddr local_;
  Fd epfd_;
  core::HelloListener listener_;
  PollItem listen_item_{PollItem::kListener};
  Fd wake_;  // eventfd in the epoll set: abort() wakes a sleeping progress
  PollItem wake_item_{PollItem::kWake};
  std::multimap<uint64_t, Parked> parked_;       // key -> HELLOed sockets
  std::map<uint64_t, std::string> tls_refused_;  // key -> why a parked handshake failed
  bool parked_tls_ = false;                      // some parked TLS handshake still runs
  std::vector<epoll_event> events_;
  uint32_t polls_ = 0;
  core::LivenessTick live_tick_;
  uint32_t direct_polls_ = 0;        // direct polls in a row
  bool unwatched_ = false;           // the streams are out of the epoll set
  std::unique_ptr<TlsContext> tls_;  // tcp.tls=on
  std::vector<SockAddr> links_;      // tcp.ifaces: each link's address (port 0); else empty
  std::vector<std::string> link_names_;
};

/// A peer's address: its links (one for version 1).
Result<std::vector<SockAddr>> decode_links(const Address& a);

}  // namespace gw::drv::tcp
