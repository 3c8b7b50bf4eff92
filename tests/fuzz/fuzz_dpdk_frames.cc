// The dpdk driver's receive path (drivers/dpdk/dpdk_progress.cc handle_frame, then the endpoint's
// data, batch, ack/sack, syn and fin handling and reassembly into posted receives), fed frames
// through the in-process ring bus the way the dpdk suite's junk tests do. Transports a and b
// live for the whole run (the EAL starts once per process); each input gets a fresh a<->b
// connection, so inputs do not depend on each other.
// Input: flags byte, [receive size u16, tag u8 when flags bit 0], then frames, each a u16
// length and that many bytes: a gradwire header (64 bytes) and payload, wrapped in valid
// Ethernet/IPv4/UDP headers from b to a (flags bit 4: the bytes are the whole frame). Bit 1
// keeps the input's connection ids (else the real ones), bit 2 forces magic and version.
#include "fuzz_dpdk.h"  // first: dpdk_target.h, the ISA of DPDK's inline functions

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "dpdk_eal.h"
#include "fuzz_util.h"

namespace {
using namespace gw::drv::dpdk;

struct Rig {
  std::unique_ptr<gw::Transport> a, b;
  gw::fuzz::DpdkSide sa, sb;
  rte_ring* rx = nullptr;
  rte_mempool* pool = nullptr;
  uint64_t key = 0;
};
Rig* g_rig = nullptr;
constexpr size_t kMaxFrame = gw::fuzz::kDpdkMaxFrame;
constexpr size_t kOuter = gw::fuzz::kDpdkOuter;

// The smallest window and posted-request table: every connection allocates and zeroes them
// (rwin = 2 x window slots), which was a quarter of an input's cost at window 256 and 1024
// posted; an input carries 16 frames and one receive, far inside either.
std::unique_ptr<gw::Transport> open_ring() {
  return gw::fuzz::dpdk_open(
      "dpdk:ring=fuzz,max_message_bytes=1048576,unexpected_bytes=1048576,window=64,"
      "max_outstanding=64");
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
  return gw::fuzz::dpdk_wrap(g_rig->sb, g_rig->sa, wire);
}

void inject(const std::vector<uint8_t>& f) { gw::fuzz::dpdk_inject(g_rig->pool, g_rig->rx, f); }
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  g_rig = new Rig;
  g_rig->a = open_ring();
  g_rig->b = open_ring();
  g_rig->sa = gw::fuzz::dpdk_side(*g_rig->a);
  g_rig->sb = gw::fuzz::dpdk_side(*g_rig->b);
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
    gw::fuzz::dpdk_fix_header(wire, flags, *ep);
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
