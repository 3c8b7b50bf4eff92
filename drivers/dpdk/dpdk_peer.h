/// @file dpdk_peer.h
/// What a connection knows of its peer before and while it connects: where the peer is
/// (PeerAddr) and, on the passive side, its SYN parked until connect() (ParkedSyn).
#pragma once

#include <rte_ether.h>

#include <cstdint>

#include "dpdk_links.h"
#include "dpdk_wire.h"

namespace gw::drv::dpdk {

/// Where a peer is: MAC, IPv4 and UDP port (network order), transmit queue; the MAC of
/// each link both sides have (macs[0] == mac).
struct PeerAddr {
  rte_ether_addr mac{};
  uint32_t ip = 0;
  uint16_t port = 0;
  uint16_t txq = 0;
  uint8_t links = 1;
  rte_ether_addr macs[kMaxLinks]{};
};

/// A SYN that arrived before its connect() (passive side), by connection key.
struct ParkedSyn {
  uint32_t src_conn = 0;
  uint32_t wnd = 0;
  uint8_t hello[kSynHello] = {};  ///< the dialler's ClientHello
};

}  // namespace gw::drv::dpdk
