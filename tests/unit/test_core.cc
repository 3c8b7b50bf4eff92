// The transport core (gw_core.h) on its own: the matching rule, the unexpected budget, the
// completion sink's accounting and an endpoint's failure, driven as a driver drives them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core_fixture.h"
#include "gw_core.h"
#include "log.h"

namespace gw::core {
namespace {

// An endpoint whose driver is the test itself.
class TestEndpoint final : public Endpoint {
 public:
  TestEndpoint(TransportCore* t, uint32_t id, size_t recvs = 8, size_t msgs = 8) {
    peer_id_ = id;
    peer_name_ = "rank " + std::to_string(id);
    core.init(t, this, recvs, msgs);
  }
  Result<size_t> post_send(std::span<const SendRequest>) override { return size_t{0}; }
  Result<size_t> post_recv(std::span<const RecvRequest> reqs) override {
    return core.post_recv(reqs, [](const RecvRequest&) { return Status(); });
  }
  Status status() const override { return core.error(); }
  // The peer's message arrives whole: begin + copy + finish. False: back-pressure.
  bool arrive(uint64_t seq, uint64_t tag, const std::vector<uint8_t>& bytes) {
    const int m = core.begin(seq, tag, bytes.size());
    if (m < 0) return false;
    if (core.msg(m).base) std::memcpy(core.msg(m).base, bytes.data(), bytes.size());
    core.finish(m);
    return true;
  }
  EndpointCore core;
};

using Fixture = CoreFixture;

using Core = Fixture;

TEST_F(Core, EarliestPostedReceiveWinsAcrossEndpointAndAnySource) {
  TestEndpoint a(&t, 1);
  uint8_t b1[4], b2[4], b3[4];
  RecvRequest any{b1, 4, 5, 100, nullptr}, own{b2, 4, 5, 200, nullptr},
      other{b3, 4, 6, 300, nullptr};
  ASSERT_EQ(t.post_recv_any({&any, 1}).value(), 1u);  // posted first
  ASSERT_EQ(a.post_recv({&own, 1}).value(), 1u);
  ASSERT_EQ(a.post_recv({&other, 1}).value(), 1u);
  ASSERT_TRUE(a.arrive(0, 5, {1, 2, 3}));  // tag 5: the any-source receive, posted earlier
  ASSERT_TRUE(a.arrive(1, 6, {4}));        // tag 6: only `other` matches
  ASSERT_TRUE(a.arrive(2, 5, {7, 8}));     // tag 5 again: `own`
  auto c = drain();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].wr_id, 100u);
  EXPECT_EQ(c[0].ep, &a);
  EXPECT_EQ(c[0].peer_id, 1u);
  EXPECT_EQ(c[1].wr_id, 300u);
  EXPECT_EQ(c[2].wr_id, 200u);
  EXPECT_EQ(c[2].len, 2u);
  EXPECT_EQ(b2[1], 8);
}

TEST_F(Core, UnexpectedBudgetBackPressuresThenDrains) {
  TestEndpoint a(&t, 1);
  std::vector<uint8_t> sixty(60, 0xAB), fifty(50, 0xCD);
  ASSERT_TRUE(a.arrive(0, 1, sixty));   // 60 of 100 bytes buffered
  EXPECT_FALSE(a.arrive(1, 1, fifty));  // would exceed: stays in the network
  EXPECT_EQ(t.store().used(), 60u);
  EXPECT_TRUE(a.status().ok()) << "a healthy peer is never failed for sending early";
  uint8_t buf[64] = {};
  RecvRequest r{buf, 64, 1, 7, nullptr};
  ASSERT_EQ(a.post_recv({&r, 1}).value(), 1u);  // takes the buffered message
  EXPECT_EQ(t.store().used(), 0u);
  EXPECT_EQ(buf[59], 0xAB);
  ASSERT_TRUE(a.arrive(1, 1, fifty));  // now it fits
  auto c = drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].len, 60u);
  EXPECT_EQ(t.counters().unexpected_msgs, 2u);
}

TEST_F(Core, AnySourceTakesTheOldestBufferedMessageOfAllEndpoints) {
  TestEndpoint a(&t, 1), b(&t, 2);
  ASSERT_TRUE(b.arrive(0, 3, {2}));  // arrived first, on b
  ASSERT_TRUE(a.arrive(0, 3, {1}));
  uint8_t x = 0, y = 0;
  RecvRequest rx{&x, 1, 3, 1, nullptr}, ry{&y, 1, kAnyTag, 2, nullptr};
  ASSERT_EQ(t.post_recv_any({&rx, 1}).value(), 1u);
  ASSERT_EQ(t.post_recv_any({&ry, 1}).value(), 1u);
  auto c = drain();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].ep, &b);
  EXPECT_EQ(x, 2);
  EXPECT_EQ(c[1].ep, &a);
  EXPECT_EQ(y, 1);
}

TEST_F(Core, TooSmallReceiveFailsAloneAndTheMessageIsDropped) {
  TestEndpoint a(&t, 1);
  uint8_t small[2];
  RecvRequest r{small, 2, 1, 9, nullptr};
  ASSERT_EQ(a.post_recv({&r, 1}).value(), 1u);
  ASSERT_TRUE(a.arrive(0, 1, {1, 2, 3, 4}));
  auto c = drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].code, Code::kInvalidArgument);
  EXPECT_EQ(c[0].len, 4u);  // the message's length, so the caller can retry
  EXPECT_TRUE(a.status().ok());
  EXPECT_EQ(t.counters().truncated_recvs, 1u);
}

TEST_F(Core, SinkDepthBoundsRequestsButNotEndpointEvents) {
  std::vector<std::unique_ptr<TestEndpoint>> eps;
  for (uint32_t i = 0; i < 40; ++i) eps.push_back(std::make_unique<TestEndpoint>(&t, i));
  // 40 endpoints reserved their error events; the 16 request slots are all still free.
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(eps[0]->core.reserve()) << i;
  EXPECT_FALSE(eps[0]->core.reserve());
  for (int i = 0; i < 16; ++i) eps[0]->core.complete(i, 0, 0, Op::kSend, Code::kOk);
  for (auto& e : eps) {
    ASSERT_TRUE(e->core.set_error(Status(Code::kRemoteError, "gone"), true, false));
    e->core.fail_receives(Code::kRemoteError, [](int) { return false; });
    e->core.report_error();
  }
  auto c = drain();
  EXPECT_EQ(c.size(), 56u) << "no completion may be dropped";
  c = drain();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_TRUE(eps[0]->core.reserve()) << "drained completions free their reservations";
}

// A progress pass hands completions straight to the caller's array while nothing older waits,
// in order, then overflows into the ring; reservations are freed either way.
TEST_F(Core, SinkDirectModeKeepsOrderAndReleases) {
  TestEndpoint ep(&t, 1);
  CompletionSink& s = t.sink();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(ep.core.reserve());
  Completion out[4];
  size_t m = s.drain(out);
  ASSERT_EQ(m, 0u);
  s.open_direct(out, m);
  for (uint64_t i = 0; i < 6; ++i) ep.core.complete(i, 0, 0, Op::kSend, Code::kOk);
  m = s.close_direct(m);
  ASSERT_EQ(m, 4u) << "the caller's array filled first";
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(out[i].wr_id, i);
  // The two that did not fit wait in the ring; while they do, no pass goes direct.
  ASSERT_TRUE(ep.core.reserve());
  s.open_direct(out, 0);
  ep.core.complete(6, 0, 0, Op::kSend, Code::kOk);
  EXPECT_EQ(s.close_direct(0), 0u) << "a newer completion overtook older ones";
  m = s.drain(out);
  ASSERT_EQ(m, 3u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].wr_id, 4 + i);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(ep.core.reserve()) << "reservation " << i << " leaked";
  EXPECT_FALSE(ep.core.reserve());
  for (uint64_t i = 0; i < 16; ++i) ep.core.complete(i, 0, 0, Op::kSend, Code::kOk);
}

TEST_F(Core, FailureCompletesPostedAndOwedReceivesKeepsBufferedOnOrderlyClose) {
  TestEndpoint a(&t, 1);
  ASSERT_TRUE(a.arrive(0, 4, {9, 9}));  // buffered, unclaimed: stays receivable
  uint8_t buf[8];
  RecvRequest r{buf, 8, 5, 11, nullptr};
  ASSERT_EQ(a.post_recv({&r, 1}).value(), 1u);
  ASSERT_TRUE(a.core.set_error(Status(Code::kRemoteError, "rank 1 left"), true, false));
  EXPECT_FALSE(a.core.set_error(Status(Code::kRemoteError, "again"), true, false));
  a.core.fail_receives(Code::kRemoteError, [&](int m) { return a.core.msg(m).complete; });
  a.core.report_error();
  auto c = drain();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 11u);
  EXPECT_EQ(c[0].code, Code::kRemoteError);
  EXPECT_EQ(c[1].op, Op::kEndpointError);
  // The buffered message is still receivable; a receive of another tag fails at once.
  uint8_t got[2];
  RecvRequest r2{got, 2, 4, 12, nullptr}, r3{got, 2, 6, 13, nullptr};
  EXPECT_EQ(a.post_recv({&r2, 1}).value(), 1u);
  EXPECT_EQ(a.post_recv({&r3, 1}).status().code(), Code::kRemoteError);
  c = drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].code, Code::kOk);
  EXPECT_EQ(got[0], 9);
}

// The store tells its driver about every buffer it frees (rdma drops the buffer's registration
// from its cache then), and about no buffer it keeps for reuse: over budget, beyond the 16
// kept, and the kept ones when the store goes.
TEST(CoreStore, FreeHookSeesEveryFreedBufferOnce) {
  struct Seen {
    std::vector<const uint8_t*> freed;
  } seen;
  {
    UnexpectedStore st;
    st.init(1 << 20);
    st.set_free_hook(
        [](void* c, const uint8_t* p, size_t) { static_cast<Seen*>(c)->freed.push_back(p); },
        &seen);
    UBuf b;
    ASSERT_TRUE(st.take(1000, &b));
    const uint8_t* first = b.p.get();
    st.give(std::move(b), 1000);  // kept
    EXPECT_TRUE(seen.freed.empty());
    ASSERT_TRUE(st.take(900, &b));
    EXPECT_EQ(b.p.get(), first) << "a kept buffer is reused for a message of at least half";
    st.give(std::move(b), 900);
    // 20 buffers at once: 16 are kept when they come back, the 4 oldest kept are freed.
    std::vector<UBuf> many(20);
    std::vector<const uint8_t*> ptrs;
    for (auto& m : many) {
      ASSERT_TRUE(st.take(4096, &m));
      ptrs.push_back(m.p.get());
    }
    for (auto& m : many) st.give(std::move(m), 4096);
    EXPECT_EQ(seen.freed.size(), 5u);  // the 1000-byte one and 4 of the 4 KiB ones
    EXPECT_EQ(st.used(), 0u);
  }
  // The store's end frees the 16 it kept: 21 distinct buffers in all, each freed once.
  std::sort(seen.freed.begin(), seen.freed.end());
  EXPECT_EQ(std::unique(seen.freed.begin(), seen.freed.end()), seen.freed.end());
  EXPECT_EQ(seen.freed.size(), 21u);
}

TEST(CoreChecks, RequestErrorsSayWhatToDo) {
  uint8_t b[4];
  Status s = check_send("tcp", "rank 2", SendRequest{b, 10, 1, 0, nullptr}, 8);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("tcp.max_message_bytes"), std::string_view::npos) << s.to_string();
  EXPECT_NE(s.message().find("rank 2"), std::string_view::npos);
  EXPECT_FALSE(check_send("tcp", "rank 2", SendRequest{b, 4, kAnyTag, 0, nullptr}, 8).ok());
  EXPECT_FALSE(check_recv("tcp", "rank 2", RecvRequest{nullptr, 4, 1, 0, nullptr}).ok());
  EXPECT_TRUE(check_send("tcp", "rank 2", SendRequest{nullptr, 0, 1, 0, nullptr}, 8).ok());
}

}  // namespace
}  // namespace gw::core
