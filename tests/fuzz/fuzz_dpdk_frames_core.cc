// The dpdk driver's receive path without a thread, a handshake or a peer that polls (the pure
// twin of fuzz_dpdk_frames): handle_frame's checks (dpdk_progress.cc: outer headers, checksums,
// check_wire, batch_ok), then the endpoint's data, batch, ack/sack, SYN, SYN-ACK and FIN
// handling and reassembly into posted receives, all unchanged. Frames go on transport a's
// receive ring and one progress() of a takes them (the ring PMD's rx burst is one dequeue;
// handle_frame is private, so no driver code changed). What a sends lands on the ring of b,
// which is never polled: each frame is checked as b would check it (check_wire) and freed.
// One pair of transports serves every input; each input gets a fresh endpoint of a, gone at
// its end: active (flags bit 0 clear: dialled, its SYN sent, connected by the first frame of
// the peer or a SYN-ACK of the input) or passive (bit 0: accepted from a keyless SYN that the
// harness parks first, with the input's window byte; connected at once, so sends are in flight
// before the frames come).
// Input: flags byte; [window byte when passive]; [when bit 7: a byte (1 + n % 4 sends), each a
// u16 length and a tag byte]; receives (bits 5-6: 0-3 of them, fuzz_recvs.h); then up to 32
// frames, each a u16 word and (word & 0x7ff) bytes: a gradwire header and payload wrapped from
// b to a (word bit 14: the bytes are the whole frame); word bit 15: a polls after this frame.
// Flags bit 1 keeps the input's connection ids (else the endpoint's), bit 2 forces magic,
// version and seg_len, bit 3 makes the receives any-source, bit 4 posts them after the frames.
// Checks: no receive completes with more bytes than its buffer, no more completions than
// requests, every frame a sends passes check_wire, and after each input the bus's pool has as
// many mbufs in use as before it (none held or lost), no any-source receive and no byte of
// the unexpected budget is left, and the SYNs it parked are taken (so the next input finds
// the transport as this one did).
#include "fuzz_dpdk.h"  // first: dpdk_target.h, the ISA of DPDK's inline functions

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_eal.h"
#include "fuzz_recvs.h"
#include "fuzz_util.h"
#include "gw_auth.h"

namespace {
using namespace gw::drv::dpdk;
using gw::fuzz::kDpdkMaxFrame;
using gw::fuzz::kDpdkOuter;

constexpr uint64_t kKey = 0x6b6579;         // connection key of every input's endpoint
constexpr uint32_t kPeerConn = 0x00070003;  // the dialler's id in the harness's SYN
constexpr size_t kMaxFrames = 32;           // one rx burst (kBurst, dpdk_progress.cc)
constexpr uint64_t kMaxMessage = 1 << 20;

struct Rig {
  std::unique_ptr<gw::Transport> a, b;
  gw::fuzz::DpdkSide sa, sb;
  rte_ring* rx = nullptr;       // a's receive ring
  rte_ring* peer_rx = nullptr;  // b's: what a sends
  rte_mempool* pool = nullptr;  // the bus's mbufs: injected, sent, held
  unsigned in_use = 0;          // of them between inputs
  std::vector<uint8_t> payload = std::vector<uint8_t>(65536);  // what sends read
};
Rig* g = nullptr;

// Window 64 (the smallest) and 8 posted requests (an input posts at most 4 sends and 3
// receives): an endpoint allocates and zeroes its tables for each input. The timers (heartbeat,
// silent peer, retransmission) an hour away: they follow the clock, not the input, and an
// input that ran slower (a loaded machine) would otherwise take another path. At most 16
// packets held out of order (default 4096): an input's 32 frames reach the limit. No checksums
// on what a sends (a's checks of what it receives stay): 3 % of an input, not the receive path.
std::unique_ptr<gw::Transport> open_ring() {
  return gw::fuzz::dpdk_open(
      "dpdk:ring=fuzzcore,max_message_bytes=1048576,unexpected_bytes=1048576,window=64,"
      "max_outstanding=8,heartbeat_ms=3600000,peer_timeout_ms=3600000,rto_min_us=3600000000,"
      "held_max=16,checksum=off");
}

// One progress() of a (rx burst, each endpoint's pump and ack, transmit), completions drained.
// @return the requests completed; a receive never reports more than its buffer (in `r`) holds.
size_t poll(const gw::fuzz::Receives* r) {
  gw::Completion c[16];
  size_t done = 0;
  for (;;) {
    auto n = g->a->cq().poll(c);
    if (!n.ok()) return done;
    for (size_t k = 0; k < *n; ++k) {
      if (r && !r->fits(c[k])) std::abort();
      done += c[k].op != gw::Op::kEndpointError;  // the failure's notice is no request's
    }
    if (*n < 16) return done;
  }
}

// Frees what a sent, each frame checked as its receiver checks the gradwire header.
void drain_peer() {
  void* out[64];
  while (unsigned n = rte_ring_dequeue_burst(g->peer_rx, out, 64, nullptr)) {
    for (unsigned k = 0; k < n; ++k) {
      auto* m = static_cast<rte_mbuf*>(out[k]);
      if (m->pkt_len < kHdrsLen) std::abort();
      WireHdr h;
      const void* p = rte_pktmbuf_read(m, kDpdkOuter, sizeof h, &h);
      if (p != &h) std::memcpy(&h, p, sizeof h);
      if (check_wire(h, m->pkt_len - kHdrsLen, kMaxMessage)) std::abort();
      rte_pktmbuf_free(m);
    }
  }
}

// Takes the SYN parked under `tag`, if any, as connect() takes its key's; that endpoint goes
// at once. The deadline has passed: connect() looks once and does not wait.
void take_parked(uint64_t tag) {
  (void)g->a->connect({g->b->address(), tag, false, 0, "b"}, gw::Deadline(gw::Nanos(0)));
}

// The endpoint of this input. Passive: a keyless SYN with window `wnd` parked, then accepted.
std::unique_ptr<gw::Endpoint> open_endpoint(bool passive, uint8_t wnd) {
  if (passive) {
    WireHdr h{};
    h.magic = kMagic;
    h.version = kVersion;
    h.type = static_cast<uint8_t>(PktType::kSyn);
    h.seg_len = kSynHello;
    h.src_conn = kPeerConn;
    h.wnd = wnd;
    h.tag = kKey;
    std::string wire(sizeof h + kSynHello, '\0');
    std::memcpy(wire.data(), &h, sizeof h);
    gw::auth::keyless_hello(reinterpret_cast<uint8_t*>(wire.data() + sizeof h));
    gw::fuzz::dpdk_inject(g->pool, g->rx, gw::fuzz::dpdk_wrap(g->sb, g->sa, wire));
    (void)poll(nullptr);
  }
  auto e = g->a->connect({g->b->address(), kKey, !passive, 0, "b"},
                         gw::Deadline(gw::Millis(passive ? 1000 : 3'600'000)));
  if (!e.ok()) std::abort();  // the SYN is parked (passive); dialling only sends (active)
  return std::move(*e);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  gw::auth::set_key_for_test(nullptr);  // keyless: the harness's SYN is accepted at once
  g = new Rig;
  g->a = open_ring();
  g->b = open_ring();
  g->sa = gw::fuzz::dpdk_side(*g->a);
  g->sb = gw::fuzz::dpdk_side(*g->b);
  g->rx = ring_bus_rx("fuzzcore", g->sa.ring);
  g->peer_rx = ring_bus_rx("fuzzcore", g->sb.ring);
  g->pool = static_cast<DpdkTransport&>(*g->a).tx_pool();
  if (!g->rx || !g->peer_rx || !g->pool) std::abort();
  g->in_use = rte_mempool_in_use_count(g->pool);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const uint8_t flags = in.u8();
  const bool passive = flags & 1, any = flags & 8, late = flags & 0x10;
  Rig& r = *g;
  auto& t = static_cast<DpdkTransport&>(*r.a);
  std::unique_ptr<gw::Endpoint> owner = open_endpoint(passive, passive ? in.u8() : 0);
  auto* ep = static_cast<DpdkEndpoint*>(owner.get());

  size_t posted = 0;
  if (flags & 0x80) {
    std::vector<gw::SendRequest> sends(1 + in.u8() % 4);
    for (size_t i = 0; i < sends.size(); ++i)
      sends[i] = {r.payload.data(), in.u16(), in.u8(), 1000 + i, nullptr};
    auto n = ep->post_send(sends);
    posted += n.ok() ? *n : 0;
  }
  const gw::fuzz::Receives rr(in, (flags >> 5) & 3);
  auto post = [&] {
    if (rr.reqs.empty()) return;
    auto n = any ? t.post_recv_any(rr.reqs) : ep->post_recv(rr.reqs);
    posted += n.ok() ? *n : 0;
  };
  if (!late) post();

  size_t done = 0;
  std::vector<uint64_t> syns;  // tags of the SYNs sent (a may park them)
  for (size_t i = 0; i < kMaxFrames && in.size() > 0; ++i) {
    const uint16_t word = in.u16();
    const bool raw = word & 0x4000;
    std::string wire(
        in.take(std::min<size_t>(word & 0x7ff, kDpdkMaxFrame - (raw ? 0 : kDpdkOuter))));
    if (!raw) gw::fuzz::dpdk_fix_header(wire, flags, *ep);
    const std::vector<uint8_t> f = raw ? std::vector<uint8_t>(wire.begin(), wire.end())
                                       : gw::fuzz::dpdk_wrap(r.sb, r.sa, wire);
    if (f.size() >= kHdrsLen) {
      WireHdr h;
      std::memcpy(&h, f.data() + kDpdkOuter, sizeof h);
      if (h.type == static_cast<uint8_t>(PktType::kSyn)) syns.push_back(h.tag);
    }
    gw::fuzz::dpdk_inject(r.pool, r.rx, f);
    if (word & 0x8000) done += poll(&rr);
  }
  // The rest of the burst, then what its acks let the endpoint send.
  done += poll(&rr);
  done += poll(&rr);
  if (late) {
    post();
    done += poll(&rr);
  }
  owner.reset();  // FINs if connected; held mbufs freed; its receives dropped
  t.core().fail_any(gw::Code::kAborted);
  for (uint64_t tag : syns) take_parked(tag);
  done += poll(&rr);
  drain_peer();
  if (done > posted) std::abort();  // every completion is one of this input's requests
  if (t.core().any_posted() != 0) std::abort();
  if (t.core().store().used() != 0) std::abort();  // unexpected bytes of no endpoint
  if (rte_mempool_in_use_count(r.pool) != r.in_use) std::abort();  // an mbuf held or lost
  return 0;
}
