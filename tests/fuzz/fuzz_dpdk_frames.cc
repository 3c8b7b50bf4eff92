// The dpdk driver's receive path (drivers/dpdk/dpdk_rx.cc handle_frame, then the endpoint's
// data, batch, ack/sack, syn and fin handling and reassembly into posted receives), fed frames
// through the in-process ring bus the way the dpdk suite's junk tests do. Transports a and b
// live for the whole run (the EAL starts once per process); each input gets a fresh a<->b
// connection, so inputs do not depend on each other.
// Input: flags byte, [receive size u16, tag u8 when flags bit 0], then frames, each a u16
// length and that many bytes: a gradwire header (64 bytes) and payload, wrapped in valid
// Ethernet/IPv4/UDP headers from b to a (flags bit 4: the bytes are the whole frame). Bit 1
// keeps the input's connection ids (else the real ones), bit 2 forces magic and version.
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_udp.h>
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "dpdk_eal.h"
#include "dpdk_endpoint.h"
#include "dpdk_wire.h"
#include "fuzz_util.h"

namespace {
using namespace gw::drv::dpdk;

struct Side {
  rte_ether_addr mac;
  uint32_t ip;
  uint16_t port;
  int ring;
};

Side side_of(const gw::Transport& t) {
  const auto a = gw::drv::dpdk::decode_addr(t.address().payload().data());
  Side s{};
  std::memcpy(s.mac.addr_bytes, a.mac, 6);
  s.ip = a.ip;
  s.port = a.port;
  s.ring = a.ring;
  return s;
}

struct Rig {
  std::unique_ptr<gw::Transport> a, b;
  Side sa, sb;
  rte_ring* rx = nullptr;
  rte_mempool* pool = nullptr;
  uint64_t key = 0;
};
Rig* g_rig = nullptr;
constexpr size_t kMaxFrame = 2048;  // RTE_MBUF_DEFAULT_DATAROOM: one mbuf, no chain
constexpr size_t kOuter = kEthLen + kIpLen + kUdpLen;

// The smallest window and posted-request table: every connection allocates and zeroes them
// (rwin = 2 x window slots), which was a quarter of an input's cost at window 256 and 1024
// posted; an input carries 16 frames and one receive, far inside either.
std::unique_ptr<gw::Transport> open_ring() {
  auto t = gw::Transport::open(
      "dpdk:ring=fuzz,max_message_bytes=1048576,unexpected_bytes=1048576,window=64,"
      "max_outstanding=64");
  if (!t.ok()) {
    std::fprintf(stderr, "fuzz_dpdk_frames: %s\n", t.status().to_string().c_str());
    std::abort();
  }
  return std::move(*t);
}

void poll_both(int rounds) {
  gw::Completion c[16];
  for (int i = 0; i < rounds; ++i) {
    (void)g_rig->a->cq().poll(c);
    (void)g_rig->b->cq().poll(c);
  }
}

// Frame from b to a around `wire` (a gradwire header and payload), checksums valid.
std::vector<uint8_t> wrap(std::string_view wire) {
  std::vector<uint8_t> f(kOuter + wire.size());
  auto* eth = reinterpret_cast<rte_ether_hdr*>(f.data());
  eth->dst_addr = g_rig->sa.mac;
  eth->src_addr = g_rig->sb.mac;
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + kEthLen);
  ip->version_ihl = 0x45;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = g_rig->sb.ip;
  ip->dst_addr = g_rig->sa.ip;
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(f.size() - kEthLen));
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen);
  udp->src_port = g_rig->sb.port;
  udp->dst_port = g_rig->sa.port;
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(f.size() - kEthLen - kIpLen));
  if (!wire.empty()) std::memcpy(f.data() + kOuter, wire.data(), wire.size());
  udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
  return f;
}

void inject(const std::vector<uint8_t>& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(g_rig->pool);
  if (!m) std::abort();
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
  if (!p) std::abort();  // frames are kept within one mbuf's data room (kMaxFrame)
  if (!f.empty()) std::memcpy(p, f.data(), f.size());
  if (rte_ring_enqueue(g_rig->rx, m) != 0) rte_pktmbuf_free(m);  // ring full: a lost frame
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  g_rig = new Rig;
  g_rig->a = open_ring();
  g_rig->b = open_ring();
  g_rig->sa = side_of(*g_rig->a);
  g_rig->sb = side_of(*g_rig->b);
  g_rig->rx = ring_bus_rx("fuzz", g_rig->sa.ring);
  g_rig->pool = rte_pktmbuf_pool_create("gwfuzz_inject", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  if (!g_rig->rx || !g_rig->pool) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const uint8_t flags = in.u8();
  Rig& r = *g_rig;
  const uint64_t key = ++r.key;
  std::unique_ptr<gw::Endpoint> ba;
  std::thread tb([&] {
    auto e = r.b->connect({r.a->address(), key, false, 0, "a"}, gw::Deadline(gw::Millis(5000)));
    if (e.ok()) ba = std::move(*e);
  });
  auto ab = r.a->connect({r.b->address(), key, true, 1, "b"}, gw::Deadline(gw::Millis(5000)));
  tb.join();
  if (!ab.ok() || !ba) std::abort();  // the ring bus always connects
  auto* ep = static_cast<DpdkEndpoint*>(ab->get());

  std::vector<uint8_t> buf;
  if (flags & 1) {
    buf.resize(in.u16() % 16384);
    gw::RecvRequest rr{buf.data(), buf.size(), in.u8(), 1, nullptr};
    (void)ep->post_recv({&rr, 1});
  }
  for (int i = 0; i < 16 && in.size() > 0; ++i) {
    std::string_view bytes = in.take(in.u16() % (kMaxFrame - (flags & 0x10 ? 0 : kOuter)));
    if (flags & 0x10) {
      inject(std::vector<uint8_t>(bytes.begin(), bytes.end()));
      continue;
    }
    std::string wire(bytes);
    if (wire.size() >= sizeof(WireHdr)) {
      WireHdr h;
      std::memcpy(&h, wire.data(), sizeof h);
      if (!(flags & 2)) {
        h.dst_conn = ep->conn();
        h.src_conn = ep->remote_conn();
      }
      if (flags & 4) {
        h.magic = kMagic;
        h.version = kVersion;
        h.seg_len = static_cast<uint16_t>(wire.size() - sizeof h);
      }
      std::memcpy(wire.data(), &h, sizeof h);
    }
    inject(wrap(wire));
  }
  gw::Completion c[16];
  for (int i = 0; i < 20; ++i) {
    auto n = r.a->cq().poll(c);
    for (size_t k = 0; n.ok() && k < *n; ++k)
      if (c[k].op == gw::Op::kRecv && c[k].code == gw::Code::kOk && c[k].len > buf.size())
        std::abort();  // a receive never reports more than its buffer holds
    (void)r.b->cq().poll(c);
  }
  ab->reset();
  ba.reset();
  poll_both(10);  // the FINs, so the next input starts clean
  return 0;
}
