// The policies every driver shares through the transport core (gw_core.h): unexpected-budget
// overflow back-pressures and never fails a healthy peer; a completion is never dropped, the
// CQ depth back-pressures posting instead (any-source receives included); a completed send's
// buffer may be reused; an endpoint failure warns only when it loses work.
#include <array>
#include <map>
#include <thread>

#include "conformance.h"
#include "log.h"

namespace gw::conformance {
namespace {

using Policy = TransportTest;

// The row with extra driver keys, e.g. "unexpected_bytes=65536".
struct Tuned {
  std::string spec;
  TransportCase tc;
  Tuned(const TransportCase& c, const std::string& extra)
      : spec(std::string(c.spec) +
             (std::string(c.spec).find(':') == std::string::npos ? ":" : ",") + extra),
        tc{c.name, c.driver, spec.c_str(), c.key} {}
};

// Polls `g` until `want` completions arrived or 30 s passed; collects them.
std::vector<Completion> collect(Group& g, size_t want, const std::function<void()>& between = {}) {
  std::vector<Completion> got;
  std::array<Completion, 64> out;
  Deadline dl(kStepTimeout);
  while (got.size() < want && !dl.expired()) {
    auto n = g.transport().cq().poll(out);
    if (!n.ok()) break;
    got.insert(got.end(), out.begin(), out.begin() + static_cast<long>(*n));
    if (between) between();
    if (*n == 0) std::this_thread::yield();
  }
  return got;
}

// Messages sent before any receive is posted, 16 times the 64 KiB budget: 64 of 16 KiB, or
// 512 of 2 KiB (eager on every driver). The receiver buffers what fits and leaves the rest in
// the network; the sender's endpoint and the receiver's stay healthy, and every byte arrives
// once receives are posted.
void overflow_case(const TransportCase& row, size_t kLen) {
  Tuned t(row, "unexpected_bytes=65536");
  auto g = make_groups(t.tc, 2);
  ASSERT_EQ(g.size(), 2u);
  const int kMsgs = static_cast<int>(16 * 65536 / kLen);
  std::vector<std::vector<uint8_t>> tx(kMsgs, std::vector<uint8_t>(kLen));
  std::vector<SendRequest> sr;
  for (int i = 0; i < kMsgs; ++i) {
    fill_pattern(tx[i].data(), kLen, msg_seed(1, 0, 7, static_cast<uint64_t>(i)));
    sr.push_back({tx[i].data(), kLen, 7, static_cast<uint64_t>(i), nullptr});
  }
  size_t posted = 0;
  std::array<Completion, 64> out;
  // Both sides progress for a while with no receive posted.
  Deadline soak(Millis(300));
  while (!soak.expired()) {
    if (posted < sr.size()) {
      auto n = g[1]->endpoint(0).post_send({sr.data() + posted, sr.size() - posted});
      ASSERT_TRUE(n.ok()) << n.status().to_string();
      posted += *n;
    }
    auto a = g[1]->transport().cq().poll(out);
    ASSERT_TRUE(a.ok());
    for (size_t i = 0; i < *a; ++i) ASSERT_EQ(out[i].code, Code::kOk) << "rank 1 completion";
    auto b = g[0]->transport().cq().poll(out);
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(*b, 0u) << "rank 0 completed something with no receive posted";
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ASSERT_TRUE(g[0]->endpoint(1).status().ok()) << g[0]->endpoint(1).status().to_string();
  ASSERT_TRUE(g[1]->endpoint(0).status().ok()) << g[1]->endpoint(0).status().to_string();
  EXPECT_LE(g[0]->transport().stats()["unexpected_bytes_now"], 65536u);

  std::vector<std::vector<uint8_t>> rx(kMsgs, std::vector<uint8_t>(kLen + kGuard, kGuardByte));
  std::vector<RecvRequest> rr;
  for (int i = 0; i < kMsgs; ++i)
    rr.push_back({rx[i].data(), kLen, 7, static_cast<uint64_t>(i), nullptr});
  size_t rposted = 0;
  auto got = collect(*g[0], kMsgs, [&] {
    if (rposted < rr.size()) {
      auto n = g[0]->endpoint(1).post_recv({rr.data() + rposted, rr.size() - rposted});
      if (n.ok()) rposted += *n;
    }
    if (posted < sr.size()) {
      auto n = g[1]->endpoint(0).post_send({sr.data() + posted, sr.size() - posted});
      if (n.ok()) posted += *n;
    }
    (void)g[1]->transport().cq().poll(out);
  });
  ASSERT_EQ(got.size(), static_cast<size_t>(kMsgs)) << kLen << "-byte messages";
  for (const Completion& c : got) {
    ASSERT_EQ(c.code, Code::kOk) << "receive " << c.wr_id;
    ASSERT_EQ(c.len, kLen);
  }
  for (int i = 0; i < kMsgs; ++i) {
    EXPECT_EQ(check_pattern(rx[i].data(), kLen, msg_seed(1, 0, 7, static_cast<uint64_t>(i))), "")
        << "message " << i;
    EXPECT_EQ(rx[i][kLen], kGuardByte) << "message " << i << " overran its buffer";
  }
  EXPECT_TRUE(g[0]->endpoint(1).status().ok());
}

TEST_P(Policy, UnexpectedOverflowBackPressuresAndNeverFails) { overflow_case(tc(), 16 * 1024); }
TEST_P(Policy, UnexpectedOverflowOfSmallMessagesBackPressures) { overflow_case(tc(), 2048); }

// With cq_depth=16 a burst of 100 sends is taken 16 at a time at most, and each accepted
// request completes exactly once: back-pressure at post time, never a dropped completion.
TEST_P(Policy, CompletionQueueDepthBackPressuresAndDropsNothing) {
  Tuned t(tc(), "cq_depth=16");
  auto g = make_groups(t.tc, 2);
  ASSERT_EQ(g.size(), 2u);
  constexpr int kMsgs = 100;
  std::vector<uint8_t> tx(64 * kMsgs), rx(64 * kMsgs);
  std::vector<SendRequest> sr;
  std::vector<RecvRequest> rr;
  for (int i = 0; i < kMsgs; ++i) {
    fill_pattern(tx.data() + 64 * i, 64, msg_seed(0, 1, 3, static_cast<uint64_t>(i)));
    sr.push_back({tx.data() + 64 * i, 64, 3, static_cast<uint64_t>(i), nullptr});
    rr.push_back({rx.data() + 64 * i, 64, 3, static_cast<uint64_t>(i), nullptr});
  }
  auto first = g[0]->endpoint(1).post_send(sr);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_GT(*first, 0u);
  EXPECT_LE(*first, 16u) << "more sends accepted than the CQ can hold";
  // Any-source receives reserve their completion too.
  auto any = g[1]->transport().post_recv_any(rr);
  ASSERT_TRUE(any.ok()) << any.status().to_string();
  EXPECT_GT(*any, 0u);
  EXPECT_LE(*any, 16u) << "more any-source receives accepted than the CQ can hold";
  size_t sposted = *first, rposted = *any;
  std::map<uint64_t, int> sends, recvs;
  std::array<Completion, 8> out;  // smaller than the depth: completions wait in the queue
  Deadline dl(kStepTimeout);
  while ((sends.size() < kMsgs || recvs.size() < kMsgs) && !dl.expired()) {
    if (sposted < sr.size()) {
      auto n = g[0]->endpoint(1).post_send({sr.data() + sposted, sr.size() - sposted});
      ASSERT_TRUE(n.ok());
      sposted += *n;
    }
    if (rposted < rr.size()) {
      auto n = g[1]->transport().post_recv_any({rr.data() + rposted, rr.size() - rposted});
      ASSERT_TRUE(n.ok());
      rposted += *n;
    }
    for (int side = 0; side < 2; ++side) {
      auto n = g[side]->transport().cq().poll(out);
      ASSERT_TRUE(n.ok());
      for (size_t i = 0; i < *n; ++i) {
        ASSERT_EQ(out[i].code, Code::kOk) << "side " << side << " wr " << out[i].wr_id;
        ++(out[i].op == Op::kSend ? sends : recvs)[out[i].wr_id];
      }
    }
  }
  ASSERT_EQ(sends.size(), static_cast<size_t>(kMsgs));
  ASSERT_EQ(recvs.size(), static_cast<size_t>(kMsgs));
  for (auto& [id, k] : sends) EXPECT_EQ(k, 1) << "send " << id;
  for (auto& [id, k] : recvs) EXPECT_EQ(k, 1) << "receive " << id;
  // Messages match receives in send order, so receive i holds message i.
  for (int i = 0; i < kMsgs; ++i)
    EXPECT_EQ(check_pattern(rx.data() + 64 * i, 64, msg_seed(0, 1, 3, static_cast<uint64_t>(i))),
              "")
        << "message " << i;
}

// gw_transport.h: once a send completed, its buffer may be reused. Overwrite it before the
// receive is even posted; the receiver must still get the original bytes.
TEST_P(Policy, CompletedSendBufferMayBeReused) {
  auto g = make_groups(tc(), 2);
  ASSERT_EQ(g.size(), 2u);
  for (size_t len : {size_t{64}, size_t{8192}, size_t{1} << 20}) {
    std::vector<uint8_t> tx(len), rx(len + kGuard, kGuardByte);
    fill_pattern(tx.data(), len, msg_seed(1, 0, 5, len));
    SendRequest sr{tx.data(), len, 5, 1, nullptr};
    ASSERT_EQ(g[1]->endpoint(0).post_send({&sr, 1}).value(), 1u);
    // Rank 0 progresses too (a polling transport acknowledges only while polled).
    auto done = collect(*g[1], 1, [&] { (void)g[0]->transport().cq().poll({}); });
    ASSERT_EQ(done.size(), 1u);
    ASSERT_EQ(done[0].code, Code::kOk);
    std::fill(tx.begin(), tx.end(), 0xEE);
    RecvRequest rr{rx.data(), len, 5, 2, nullptr};
    ASSERT_EQ(g[0]->endpoint(1).post_recv({&rr, 1}).value(), 1u);
    auto got = collect(*g[0], 1, [&] { (void)g[1]->transport().cq().poll({}); });
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].code, Code::kOk);
    EXPECT_EQ(check_pattern(rx.data(), len, msg_seed(1, 0, 5, len)), "") << len << " bytes";
  }
}

// A peer leaving with nothing pending is how a job ends: no warning. A peer leaving while a
// receive waits for it loses work: one warning naming it.
TEST_P(Policy, EndpointFailureWarnsOnlyWhenWorkIsLost) {
  for (bool pending : {false, true}) {
    auto g = make_groups(tc(), 2);
    ASSERT_EQ(g.size(), 2u);
    WarnCounter warns(tc().driver);
    uint8_t buf[16];
    RecvRequest rr{buf, sizeof buf, 1, 9, nullptr};
    if (pending) {
      ASSERT_EQ(g[0]->endpoint(1).post_recv({&rr, 1}).value(), 1u);
    }
    g[1].reset();  // rank 1 leaves in order
    std::vector<Completion> got = collect(*g[0], pending ? 2 : 1);
    bool event = false;
    for (const Completion& c : got) event |= c.op == Op::kEndpointError;
    ASSERT_TRUE(event) << "no endpoint-error event after the peer left";
    auto w = warns.warnings();
    if (pending) {
      ASSERT_EQ(w.size(), 1u) << "a failure that lost a receive must warn once";
      EXPECT_NE(w[0].find("rank 1"), std::string::npos) << w[0];
    } else {
      EXPECT_TRUE(w.empty()) << "orderly close with nothing pending warned: " << w[0];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tr, Policy, ::testing::ValuesIn(built_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Policy);

}  // namespace
}  // namespace gw::conformance
