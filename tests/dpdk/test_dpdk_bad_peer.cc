// A peer that breaks the protocol in ways the fuzz targets found (tests/fuzz,
// fuzz_dpdk_frames_core): the endpoint fails with ProtocolError and no request completes
// more than once.
#include <gtest/gtest.h>

#include <vector>

#include "conformance.h"
#include "dpdk_endpoint.h"
#include "dpdk_frames.h"

namespace gw::dpdktest {
namespace {

using conformance::TransportCase;

// The end of one message sent twice, at two sequence numbers. The later one comes first: its
// message is the next to match, so it is matched and placed at once; the earlier one then
// finishes the message. Consuming the later one after it finished the message again: the
// receive completed twice and the message's slot went twice on the free list (two messages
// could then share one slot and its buffer).
TEST(DpdkBadPeer, AMessageEndedTwiceCompletesItsReceiveOnce) {
  BadPeerBed t;
  ASSERT_NO_FATAL_FAILURE(t.open("twice", "dpdk:ring=twice"));
  Group& a = *t.a;
  DpdkEndpoint* ea = t.ea;
  const Side sa = t.sa, sb = t.sb;
  Injector& inj = *t.inj;
  std::vector<uint8_t> buf(64, 0);
  RecvRequest r{buf.data(), buf.size(), 77, 4242, nullptr};
  auto posted = a.endpoint(1).post_recv({&r, 1});
  ASSERT_TRUE(posted.ok() && *posted == 1u) << posted.status().to_string();

  WireHdr h = data_hdr(*ea);
  h.msg_id = ea->next_match();
  h.tag = 77;
  h.msg_len = h.seg_len = 10;
  h.seq = ea->rcv_nxt() + 1;  // behind a hole
  inj.send(frame(sb, sa, h, std::vector<uint8_t>(10, 1)));
  h.seq = ea->rcv_nxt();  // the hole: the whole message again
  inj.send(frame(sb, sa, h, std::vector<uint8_t>(10, 2)));

  int completions = 0;
  Completion comp[8];
  for (int i = 0; i < 100; ++i) {
    auto n = a.transport().cq().poll(comp);
    for (size_t k = 0; n.ok() && k < *n; ++k) {
      if (comp[k].op != Op::kRecv) continue;
      ++completions;
      EXPECT_EQ(comp[k].wr_id, 4242u);
      EXPECT_EQ(comp[k].len, 10u);
    }
  }
  EXPECT_EQ(completions, 1);
  EXPECT_EQ(a.endpoint(1).status().code(), Code::kProtocolError)
      << a.endpoint(1).status().to_string();
}

}  // namespace
}  // namespace gw::dpdktest
