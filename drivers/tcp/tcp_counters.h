/// @file tcp_counters.h
/// TcpCounters: what a TcpTransport counts (its stats(); TcpTransport::Counters).
/// Thread-safety: none (the transport's driving thread).
#pragma once

#include <cstdint>

namespace gw::drv::tcp {

struct TcpCounters {
  uint64_t bytes_sent = 0, bytes_received = 0, msgs_sent = 0, rx_stalls = 0;
  uint64_t protocol_errors = 0, tls_handshakes = 0;
  uint64_t staged_tx_bytes = 0, staged_rx_bytes = 0;
  uint64_t unwatches = 0;  // times the streams left the epoll set
  uint64_t heartbeats_sent = 0, heartbeats_received = 0, peer_timeouts = 0;
  uint64_t links_out = 0, links_joined = 0, resent_bytes = 0;  // tcp.ifaces
};

}  // namespace gw::drv::tcp
