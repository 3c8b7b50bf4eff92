/// @file dpdk_frames.h
/// Crafted frames for the dpdk tests that play a bad peer (test_dpdk_ring.cc,
/// test_dpdk_bad_peer.cc): a frame around a gradwire header (dpdk_frame.h), an injector that
/// puts frames on a receive ring, a connected pair to inject into. Thread-safety: none.
#pragma once

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conformance.h"
#include "dpdk_endpoint.h"
#include "dpdk_frame.h"
#include "dpdk_test_util.h"
#include "gw_group.h"

namespace gw::dpdktest {

using drv::dpdk::DpdkEndpoint;
using drv::dpdk::WireHdr;

// Ethernet/IPv4/UDP frame from `from` to `to` carrying `h` and `payload`, checksums valid.
inline std::vector<uint8_t> frame(const Side& from, const Side& to, const WireHdr& h,
                                  const std::vector<uint8_t>& payload) {
  std::string wire(sizeof h + payload.size(), '\0');
  std::memcpy(wire.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(wire.data() + sizeof h, payload.data(), payload.size());
  return wrap(from, to, wire);
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

// Ranks 0 (`a`) and 1 over ring bus `ring` (transport spec `spec`), past a few messages, with an
// injector onto rank 0's receive ring: where every bad-peer test starts. Call open() inside
// ASSERT_NO_FATAL_FAILURE. Members go in reverse: the injector before the groups.
struct BadPeerBed {
  std::vector<std::unique_ptr<Group>> gs;
  Group* a = nullptr;
  DpdkEndpoint* ea = nullptr;  // rank 0's endpoint to rank 1
  Side sa{}, sb{};
  std::unique_ptr<Injector> inj;

  void open(const char* ring, const char* spec) {
    gs = conformance::make_groups(conformance::TransportCase{ring, "dpdk", spec}, 2);
    ASSERT_EQ(gs.size(), 2u);
    a = gs[0].get();
    exchange_some(*a, *gs[1]);
    ea = dynamic_cast<DpdkEndpoint*>(&a->endpoint(1));
    ASSERT_NE(ea, nullptr);
    sa = side_of(a->transport());
    sb = side_of(gs[1]->transport());
    inj = std::make_unique<Injector>(drv::dpdk::ring_bus_rx(ring, sa.ring));
    ASSERT_TRUE(inj->ok());
  }
};

}  // namespace gw::dpdktest
