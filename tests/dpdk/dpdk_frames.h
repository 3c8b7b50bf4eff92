/// @file dpdk_frames.h
/// Crafted frames for the dpdk tests that play a bad peer (test_dpdk_ring.cc,
/// test_dpdk_bad_peer.cc): a transport's place on the ring bus, a frame around a gradwire
/// header, an injector that puts frames on a receive ring. Thread-safety: none.
#pragma once

#include <gtest/gtest.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include <cstring>
#include <thread>
#include <vector>

#include "dpdk_endpoint.h"
#include "dpdk_test_util.h"
#include "gw_group.h"

namespace gw::dpdktest {

using drv::dpdk::DpdkEndpoint;
using drv::dpdk::WireHdr;

struct Side {
  rte_ether_addr mac;
  uint32_t ip;
  uint16_t port;
  int ring;
};

inline Side side_of(const Transport& t) {
  const auto a = gw::drv::dpdk::decode_addr(t.address().payload().data());
  Side s{};
  std::memcpy(s.mac.addr_bytes, a.mac, 6);
  s.ip = a.ip;
  s.port = a.port;
  s.ring = a.ring;
  return s;
}

// Ethernet/IPv4/UDP frame from `from` to `to` carrying `h` and `payload`, checksums valid.
inline std::vector<uint8_t> frame(const Side& from, const Side& to, const WireHdr& h,
                                  const std::vector<uint8_t>& payload) {
  using namespace drv::dpdk;
  std::vector<uint8_t> f(kHdrsLen + payload.size());
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
  std::memcpy(f.data() + kEthLen + kIpLen + kUdpLen, &h, sizeof h);
  if (!payload.empty()) std::memcpy(f.data() + kHdrsLen, payload.data(), payload.size());
  udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
  return f;
}

class Injector {
 public:
  explicit Injector(rte_ring* r) : ring_(r) {
    pool_ = rte_pktmbuf_pool_create("gwtest_inject", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  }
  ~Injector() { rte_mempool_free(pool_); }
  bool ok() const { return pool_ && ring_; }
  void send(const std::vector<uint8_t>& f) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    ASSERT_NE(m, nullptr);
    if (!f.empty())
      std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
    while (rte_ring_enqueue(ring_, m) != 0) std::this_thread::yield();
    ++sent_;
  }
  int sent() const { return sent_; }

 private:
  rte_ring* ring_;
  rte_mempool* pool_ = nullptr;
  int sent_ = 0;
};

// A data header from rank 1 to `ep` (rank 0's endpoint), lengths and numbers left to the test.
inline WireHdr data_hdr(const DpdkEndpoint& ep) {
  WireHdr h{};
  h.magic = drv::dpdk::kMagic;
  h.version = drv::dpdk::kVersion;
  h.type = static_cast<uint8_t>(drv::dpdk::PktType::kData);
  h.dst_conn = ep.conn();
  h.src_conn = ep.remote_conn();
  return h;
}

// A few messages both ways between ranks 0 (`a`) and 1 (`b`): both ends connected and past
// the handshake (its authentication included) before a test crafts frames.
inline void exchange_some(Group& a, Group& b) {
  const Nanos minute = std::chrono::seconds(60);
  std::thread tb([&] { EXPECT_TRUE(run_plan(b, 0, {10, 20, 3000}, 1, minute).ok()); });
  EXPECT_TRUE(run_plan(a, 1, {10, 20, 3000}, 1, minute).ok());
  tb.join();
}

inline void drive(Group& g, int polls) {
  Completion c[16];
  for (int i = 0; i < polls; ++i) (void)g.transport().cq().poll(c);
}

}  // namespace gw::dpdktest
