/// @file fuzz_dpdk.h
/// What the dpdk targets share (fuzz_dpdk_frames, fuzz_dpdk_frames_core): a transport's place
/// on the ring bus, frames around a gradwire header with valid Ethernet/IPv4/UDP headers and
/// checksums, and a frame put on a receive ring as the ring PMD's rx burst takes it.
/// Thread-safety: none (one fuzzing thread).
#pragma once

#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dpdk_endpoint.h"
#include "dpdk_wire.h"

namespace gw::fuzz {

/// RTE_MBUF_DEFAULT_DATAROOM: a frame fits one mbuf, no chain.
inline constexpr size_t kDpdkMaxFrame = 2048;
inline constexpr size_t kDpdkOuter = drv::dpdk::kEthLen + drv::dpdk::kIpLen + drv::dpdk::kUdpLen;

/// The transport `spec` opens; aborts with its error (a target without its rig tests nothing).
inline std::unique_ptr<Transport> dpdk_open(const char* spec) {
  auto t = Transport::open(spec);
  if (!t.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec, t.status().to_string().c_str());
    std::abort();
  }
  return std::move(*t);
}

/// Where a transport is on the ring bus.
struct DpdkSide {
  rte_ether_addr mac;
  uint32_t ip;
  uint16_t port;
  int ring;
};

inline DpdkSide dpdk_side(const Transport& t) {
  const auto a = drv::dpdk::decode_addr(t.address().payload().data());
  DpdkSide s{};
  std::memcpy(s.mac.addr_bytes, a.mac, 6);
  s.ip = a.ip;
  s.port = a.port;
  s.ring = a.ring;
  return s;
}

/// A frame from `from` to `to` around `wire` (a gradwire header and payload).
inline std::vector<uint8_t> dpdk_wrap(const DpdkSide& from, const DpdkSide& to,
                                      std::string_view wire) {
  using namespace drv::dpdk;
  std::vector<uint8_t> f(kDpdkOuter + wire.size());
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
  if (!wire.empty()) std::memcpy(f.data() + kDpdkOuter, wire.data(), wire.size());
  udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
  return f;
}

/// What the input's flags ask of the gradwire header at the front of `wire` (if whole): unless
/// bit 1, the connection ids of `ep` and its peer (else the frame reaches no endpoint); bit 2:
/// the right magic, version and seg_len.
inline void dpdk_fix_header(std::string& wire, uint8_t flags, const drv::dpdk::DpdkEndpoint& ep) {
  using namespace drv::dpdk;
  if (wire.size() < sizeof(WireHdr)) return;
  WireHdr h;
  std::memcpy(&h, wire.data(), sizeof h);
  if (!(flags & 2)) {
    h.dst_conn = ep.conn();
    h.src_conn = ep.remote_conn();
  }
  if (flags & 4) {
    h.magic = kMagic;
    h.version = kVersion;
    h.seg_len = static_cast<uint16_t>(wire.size() - sizeof h);
  }
  std::memcpy(wire.data(), &h, sizeof h);
}

/// Puts `f` (at most kDpdkMaxFrame bytes) in an mbuf of `pool` on `ring`; a full ring loses it.
inline void dpdk_inject(rte_mempool* pool, rte_ring* ring, const std::vector<uint8_t>& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (!m) std::abort();
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
  if (!p) std::abort();
  if (!f.empty()) std::memcpy(p, f.data(), f.size());
  if (rte_ring_enqueue(ring, m) != 0) rte_pktmbuf_free(m);
}

}  // namespace gw::fuzz
