// The transport core's entries for a driver with its own protocol (rdma): deferred messages
// (a rendezvous request buffered without its bytes), cookies on posted receives, receives
// claimed by the peer's direct write, the bound on buffered messages, any-source per endpoint
// and posting on a failed endpoint while the driver holds a message.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core_fixture.h"
#include "gw_core.h"
#include "log.h"

namespace gw::core {
namespace {

// An endpoint whose driver is the test: it records claims of deferred messages.
class DriverEndpoint final : public Endpoint, private RecvHooks {
 public:
  DriverEndpoint(TransportCore* t, uint32_t id, size_t msgs, size_t max_unexpected) {
    peer_id_ = id;
    peer_name_ = "rank " + std::to_string(id);
    core.init(t, this, 8, msgs, this, max_unexpected);
  }
  Result<size_t> post_send(std::span<const SendRequest>) override { return size_t{0}; }
  Result<size_t> post_recv(std::span<const RecvRequest> reqs) override {
    return core.post_recv(
        reqs, [](const RecvRequest&) { return Status(); }, [&](int i) { posted.push_back(i); },
        [&](uint64_t tag) { return tag == held_tag; });
  }
  Status status() const override { return core.error(); }
  std::vector<int> claims, posted;
  uint64_t held_tag = kAnyTag - 1;
  EndpointCore core;

 private:
  void claimed(int m) override { claims.push_back(m); }
};

using CoreDriver = CoreFixture;

TEST_F(CoreDriver, DeferredMessageHoldsNoBudgetAndItsClaimReachesTheDriver) {
  DriverEndpoint a(&t, 1, 8, 8);
  const int m = a.core.begin(0, 7, 1000, /*defer=*/true);  // ten times the budget
  ASSERT_GE(m, 0);
  EXPECT_EQ(a.core.msg(m).dest, Dest::kUnexpected);
  EXPECT_EQ(a.core.msg(m).base, nullptr);
  EXPECT_EQ(t.store().used(), 0u);
  a.core.msg(m).drv[0] = 42;  // the driver's word survives until it releases the message
  std::vector<uint8_t> buf(1000);
  RecvRequest r{buf.data(), buf.size(), 7, 9, nullptr};
  ASSERT_EQ(a.post_recv({&r, 1}).value(), 1u);
  ASSERT_EQ(a.claims.size(), 1u);
  EXPECT_EQ(a.claims[0], m);
  EXPECT_TRUE(a.core.msg(m).claimed);
  EXPECT_FALSE(a.core.msg(m).claim_err);
  EXPECT_EQ(a.core.msg(m).req.wr_id, 9u);
  EXPECT_EQ(a.core.msg(m).drv[0], 42u);
  EXPECT_TRUE(drain().empty()) << "the driver completes it once its bytes are in";
  a.core.release(m);
  a.core.complete(9, 7, 1000, Op::kRecv, Code::kOk);
  auto c = drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 9u);
  EXPECT_EQ(t.store().used(), 0u);
}

TEST_F(CoreDriver, DeferredClaimByTooSmallReceiveCompletesItWithTheError) {
  DriverEndpoint a(&t, 1, 8, 8);
  const int m = a.core.begin(0, 7, 64, true);
  uint8_t buf[16];
  RecvRequest r{buf, sizeof buf, 7, 3, nullptr};
  ASSERT_EQ(a.post_recv({&r, 1}).value(), 1u);
  ASSERT_EQ(a.claims.size(), 1u);
  EXPECT_TRUE(a.core.msg(m).claim_err);
  auto c = drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 3u);
  EXPECT_EQ(c[0].code, Code::kInvalidArgument);
  EXPECT_EQ(c[0].len, 64u);
  a.core.release(m);
}

TEST_F(CoreDriver, CookieComesWithTheMatchAndAClaimedReceiveLeavesMatching) {
  DriverEndpoint a(&t, 1, 8, 8);
  uint8_t b1[8], b2[8];
  RecvRequest r1{b1, 8, 5, 1, nullptr}, r2{b2, 8, 5, 2, nullptr};
  ASSERT_EQ(a.post_recv({&r1, 1}).value(), 1u);
  ASSERT_EQ(a.post_recv({&r2, 1}).value(), 1u);
  ASSERT_EQ(a.posted.size(), 2u);
  a.core.recvs()[a.posted[1]].cookie = 77;
  // The peer writes straight into r1: it leaves matching, its completion still reserved.
  const RecvRequest got = a.core.claim_posted(a.posted[0]);
  EXPECT_EQ(got.wr_id, 1u);
  EXPECT_EQ(a.core.posted(), 1u);
  const int m = a.core.begin(0, 5, 4);  // the next tag-5 message takes r2, with its cookie
  ASSERT_GE(m, 0);
  EXPECT_EQ(a.core.msg(m).dest, Dest::kUser);
  EXPECT_EQ(a.core.msg(m).req.wr_id, 2u);
  EXPECT_EQ(a.core.msg(m).cookie, 77u);
  a.core.finish(m);
  a.core.complete(got.wr_id, 5, 8, Op::kRecv, Code::kOk);
  auto c = drain();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 2u);
  EXPECT_EQ(c[1].wr_id, 1u);
  // Unmatched messages carry no cookie.
  const int u = a.core.begin(1, 6, 0);
  ASSERT_GE(u, 0);
  EXPECT_EQ(a.core.msg(u).cookie, kNoCookie);
  a.core.release(u);
}

TEST_F(CoreDriver, BufferedMessagesAreBoundedApartFromMessageSlots) {
  DriverEndpoint a(&t, 1, 4, 2);  // 4 slots, at most 2 of them buffered
  ASSERT_GE(a.core.begin(0, 1, 0), 0);
  ASSERT_GE(a.core.begin(1, 1, 0), 0);
  EXPECT_LT(a.core.begin(2, 1, 0), 0) << "a third buffered message waits in the network";
  uint8_t buf[4];
  RecvRequest r{buf, 4, 2, 8, nullptr};
  ASSERT_EQ(a.post_recv({&r, 1}).value(), 1u);
  const int m = a.core.begin(2, 2, 4);  // one with a posted receive still goes through
  ASSERT_GE(m, 0);
  EXPECT_EQ(a.core.msg(m).dest, Dest::kUser);
  a.core.finish(m);
  ASSERT_EQ(drain().size(), 1u);
}

TEST_F(CoreDriver, AnySourceSkipsAnEndpointUntilItIsOpenToIt) {
  DriverEndpoint a(&t, 1, 8, 8), b(&t, 2, 8, 8);
  a.core.set_any_source(false);  // e.g. accepted, not yet handed to the caller
  const int early = a.core.begin(0, 4, 0);
  ASSERT_GE(early, 0);
  a.core.finish(early);  // buffered at a
  RecvRequest any{nullptr, 0, 4, 11, nullptr};
  ASSERT_EQ(t.post_recv_any({&any, 1}).value(), 1u);
  EXPECT_EQ(t.any_posted(), 1u) << "a's message is not for any-source receives yet";
  const int m = a.core.begin(1, 4, 0);
  ASSERT_GE(m, 0);
  EXPECT_EQ(a.core.msg(m).dest, Dest::kUnexpected) << "nor are its new ones";
  a.core.finish(m);
  const int n = b.core.begin(0, 4, 0);
  ASSERT_GE(n, 0);
  EXPECT_EQ(b.core.msg(n).dest, Dest::kUser);  // b's is
  b.core.finish(n);
  auto c = drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].ep, &b);
  a.core.set_any_source(true);
  ASSERT_EQ(t.post_recv_any({&any, 1}).value(), 1u);
  c = drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].ep, &a);
  EXPECT_EQ(c[0].wr_id, 11u);
}

TEST_F(CoreDriver, FailedEndpointTakesReceivesForMessagesTheDriverHolds) {
  DriverEndpoint a(&t, 1, 8, 8);
  ASSERT_TRUE(a.core.set_error(Status(Code::kRemoteError, "rank 1 left"), true, false));
  a.core.fail_receives(Code::kRemoteError, [](int) { return false; });
  a.held_tag = 3;
  uint8_t buf[4];
  RecvRequest other{buf, 4, 2, 1, nullptr}, held{buf, 4, 3, 2, nullptr};
  auto refused = a.post_recv({&other, 1});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kRemoteError);
  ASSERT_EQ(a.post_recv({&held, 1}).value(), 1u);
  EXPECT_EQ(a.core.posted(), 1u);
}

}  // namespace
}  // namespace gw::core
