/// @file rdma_pulls.h
/// Rendezvous requests that arrive before their receive (buffered by the core, gw_core.h).
/// Within rdma.unexpected_bytes one is pulled at once: CTS to a bounce buffer (the core
/// message's), so the sender's request completes without waiting for the receive, as it does
/// over TCP. Beyond the budget the request waits for its receive, which answers it (claimed).
/// Bounce buffers come from the core's store, which reuses them, and are registered through
/// the cache, which keeps their registrations: a steady stream of early arrivals registers
/// nothing.
/// Thread-safety: none; a part of its RdmaEndpoint.
#pragma once

#include <cstdint>

namespace gw::drv::rdma {

class RdmaEndpoint;

class Pulls {
 public:
  explicit Pulls(RdmaEndpoint& ep) : ep_(ep) {}
  /// Buffered RTS m (core message): pulled now within the budget, else left for its receive.
  void pull(int m);
  /// A pulled message's last stripe landed in rendezvous slot `r`'s bounce buffer.
  void landed(uint32_t r);
  /// A receive claimed buffered RTS m: answered now, unless it is being pulled (delivered
  /// when it lands).
  void claimed(int m);

 private:
  RdmaEndpoint& ep_;
};

}  // namespace gw::drv::rdma
