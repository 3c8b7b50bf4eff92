/// @file tcp_options.h
/// The tcp transport's settings, read from [tcp] at open by one table of keys (tcp_options.cc,
/// registered with the driver).
#pragma once

#include <cstdint>
#include <string>

#include "gw_config.h"
#include "gw_socket.h"
#include "gw_staging.h"
#include "gw_status.h"

namespace gw::drv::tcp {

/// The transport's settings.
struct Options {
  int streams = 1;
  uint64_t stripe_min = 0;
  uint64_t unexpected_bytes = 0;
  uint64_t max_message = 0;
  int max_outstanding = 0;
  int cq_depth = 0;
  int hello_timeout_ms = 0;
  uint64_t heartbeat_ns = 0, peer_timeout_ns = 0;
  bool tls = false;
  // Several links (tcp.ifaces): chunk size, bytes in flight per stream, the silence that
  // takes a link out.
  uint64_t link_chunk = 0, link_window = 0, link_timeout_ns = 0, link_fault_ns = 0;
  StagingPool::Options staging;
  StreamOptions sock;
};

/// What TcpTransport::init reads: the transport's settings and where it listens.
struct Settings {
  Options opts;
  std::string iface, subnet, family;
  std::string ifaces;  // comma-separated; two or more: one stream set per link
  uint16_t port = 0;
};

/// Every [tcp] key, range-checked.
/// @return InvalidArgument naming the first bad key, where its value came from and its range.
Status read_options(const Config& cfg, Settings* s);

}  // namespace gw::drv::tcp
