/// @file dpdk_frame.h
/// Frames as a peer on the ring bus sends them, for the dpdk tests and fuzz targets that play
/// one (tests/dpdk, tests/fuzz): a transport's place on the bus, and a gradwire header and
/// payload wrapped in Ethernet/IPv4/UDP headers with valid checksums. No gtest, no EAL.
/// Thread-safety: reentrant.
#pragma once

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "dpdk_wire.h"
#include "gw_transport.h"

namespace gw::dpdktest {

/// Where a transport is on the ring bus (network order).
struct Side {
  rte_ether_addr mac;
  uint32_t ip;
  uint16_t port;
  int ring;
};

inline Side side_of(const Transport& t) {
  drv::dpdk::AddrPayload a;
  const auto& pay = t.address().payload();
  if (!drv::dpdk::decode_addr(pay.data(), pay.size(), &a)) return Side{};
  Side s{};
  std::memcpy(s.mac.addr_bytes, a.mac[0], 6);
  s.ip = a.ip;
  s.port = a.port;
  s.ring = a.ring;
  return s;
}

/// A frame from `from` to `to` around `wire` (a gradwire header and its payload).
inline std::vector<uint8_t> wrap(const Side& from, const Side& to, std::string_view wire) {
  using namespace drv::dpdk;
  std::vector<uint8_t> f(kEthLen + kIpLen + kUdpLen + wire.size());
  auto* eth = reinterpret_cast<rte_ether_hdr*>(f.data());
  eth->dst_addr = to.mac;
  eth->src_addr = from.mac;
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + kEthLen);
  ip->version_ihl = 0x45;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = from.ip;
  ip->dst_addr = to.ip;
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(f.size() - kEthLen));
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen);
  udp->src_port = from.port;
  udp->dst_port = to.port;
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(f.size() - kEthLen - kIpLen));
  if (!wire.empty()) std::memcpy(f.data() + kEthLen + kIpLen + kUdpLen, wire.data(), wire.size());
  udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
  return f;
}

}  // namespace gw::dpdktest
