// Transport::abort (gw_transport.h) on every driver and row, ranks as threads or processes:
// called from a second thread while the first sleeps in the CQ's wait() over posted receives
// (one any-source) and a send queue filled up against a peer that does not read, every
// request completes exactly once, the ones still pending with Aborted, all within 200 ms; the
// endpoint fails with Aborted naming the reason; later posts are refused with Aborted; the
// peer sees its endpoint fail (RemoteError: the connection closed) as soon as it polls.
#include <array>
#include <thread>
#include <vector>

#include "conformance.h"

namespace gw::conformance {
namespace {

using Abort = TransportTest;

constexpr size_t kSendLen = 256 * 1024;
constexpr int kRecvs = 4;

// Rank 1's part before the abort: receives for what rank 0 sends; it then does not poll, so
// nothing is read or acknowledged and rank 0's sends fill up. The buffer must outlive them.
std::vector<uint8_t> post_peer_recvs(Group& g) {
  constexpr int kPeerRecvs = 64;
  std::vector<uint8_t> rx(kPeerRecvs * kSendLen);
  std::vector<RecvRequest> rr;
  for (int i = 0; i < kPeerRecvs; ++i)
    rr.push_back({rx.data() + i * kSendLen, kSendLen, 9, static_cast<uint64_t>(i), nullptr});
  EXPECT_EQ(g.endpoint(0).post_recv(rr).value(), static_cast<size_t>(kPeerRecvs));
  return rx;
}

// Rank 1's part after the abort: its endpoint fails (the connection closed) once it polls.
void expect_peer_sees_close(Group& g) {
  std::array<Completion, 64> out;
  Deadline dl(Millis(2'000));
  while (g.endpoint(0).status().ok() && !dl.expired()) {
    (void)g.transport().cq().poll(out);
    std::this_thread::yield();
  }
  EXPECT_EQ(g.endpoint(0).status().code(), Code::kRemoteError)
      << "rank 1: " << g.endpoint(0).status().to_string();
}

// Rank 0's part: receives (one any-source) and sends until the endpoint takes no more, a
// waiter asleep in wait(), abort from this thread; every request completes once, within 200 ms.
void abort_while_waiting(Group& g) {
  Transport& tr = g.transport();
  Endpoint& ep = g.endpoint(1);
  std::vector<uint8_t> rx(kRecvs * 1024 + 1024), tx(kSendLen, 0x5a);
  std::vector<RecvRequest> rr;
  for (int i = 0; i < kRecvs; ++i)
    rr.push_back({rx.data() + 1024 * i, 1024, 9, static_cast<uint64_t>(100 + i), nullptr});
  ASSERT_EQ(ep.post_recv(rr).value(), static_cast<size_t>(kRecvs));
  RecvRequest any{rx.data() + kRecvs * 1024, 1024, 9, 200, nullptr};
  ASSERT_EQ(tr.post_recv_any({&any, 1}).value(), 1u);
  // Sends until the endpoint takes no more, with polls in between so that the transport
  // moves what it can.
  size_t sends = 0;
  std::array<Completion, 64> out;
  size_t early_ok = 0;
  bool full = false;
  for (int round = 0; round < 4000 && !full; ++round) {
    SendRequest sr{tx.data(), kSendLen, 9, 1000 + sends, nullptr};
    auto n = ep.post_send({&sr, 1});
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    sends += *n;
    auto got = tr.cq().poll(out);
    ASSERT_TRUE(got.ok());
    for (size_t i = 0; i < *got; ++i) {
      ASSERT_EQ(out[i].code, Code::kOk) << "before the abort";
      ++early_ok;
    }
    full = *n == 0;
  }
  ASSERT_TRUE(full) << "the send queue never filled up (" << sends << " sends)";
  const size_t expected = kRecvs + 1 + sends - early_ok;  // still pending when aborting

  // The waiter: completions until every pending request and the endpoint's event are in.
  std::vector<Completion> done;
  Clock::time_point last{};
  std::thread waiter([&] {
    std::array<Completion, 64> buf;
    Deadline dl(Millis(10'000));
    bool event = false;
    while ((done.size() < expected || !event) && !dl.expired()) {
      auto n = tr.cq().wait(buf, Millis(5'000));
      if (!n.ok()) continue;
      for (size_t i = 0; i < *n; ++i) {
        if (buf[i].op == Op::kEndpointError)
          event = true;
        else
          done.push_back(buf[i]);
      }
      last = Clock::now();
    }
  });
  std::this_thread::sleep_for(Millis(150));  // the waiter is asleep in wait() by now
  const auto hit = Clock::now();
  EXPECT_TRUE(tr.abort("test: abort from another thread").ok());
  waiter.join();

  ASSERT_EQ(done.size(), expected) << "every pending request completes exactly once";
  EXPECT_LT(std::chrono::duration<double>(last - hit).count(), 0.2);
  size_t aborted = 0;
  for (const Completion& c : done) {
    EXPECT_TRUE(c.code == Code::kAborted || (c.op == Op::kSend && c.code == Code::kOk))
        << "wr_id " << c.wr_id << ": " << code_name(c.code);
    aborted += c.code == Code::kAborted;
  }
  EXPECT_GE(aborted, static_cast<size_t>(kRecvs + 1)) << "receives and the any-source one";
  EXPECT_EQ(ep.status().code(), Code::kAborted) << ep.status().to_string();
  EXPECT_NE(ep.status().message().find("test: abort from another thread"), std::string_view::npos)
      << ep.status().to_string();

  // Later posts are refused.
  SendRequest sr{tx.data(), 8, 9, 1, nullptr};
  EXPECT_EQ(ep.post_send({&sr, 1}).status().code(), Code::kAborted);
  EXPECT_EQ(ep.post_recv(rr).status().code(), Code::kAborted);
  EXPECT_EQ(tr.post_recv_any({&any, 1}).status().code(), Code::kAborted);
  EXPECT_TRUE(tr.abort("again").ok()) << "a second abort changes nothing";
}

// Abort with nothing posted: a waiter still wakes (with the endpoint's failure event).
void abort_idle(Group& g) {
  Transport& tr = g.transport();
  Clock::time_point woke{};
  Result<size_t> got = size_t{0};
  std::thread waiter([&] {
    std::array<Completion, 8> buf;
    got = tr.cq().wait(buf, Millis(5'000));
    woke = Clock::now();
    if (got.ok()) {
      ASSERT_GT(*got, 0u);
      EXPECT_EQ(buf[0].op, Op::kEndpointError);
      EXPECT_EQ(buf[0].code, Code::kAborted);
    }
  });
  std::this_thread::sleep_for(Millis(150));
  const auto hit = Clock::now();
  ASSERT_TRUE(tr.abort("idle").ok());
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LT(std::chrono::duration<double>(woke - hit).count(), 0.2);
}

TEST_P(Abort, FromAnotherThreadCompletesEveryRequestWithin200ms) {
  if (is_process_row(tc())) {
    // Each rank a process (memif, af_packet): rank 1 waits for rank 0's word through the store.
    run_ranks(tc(), 2, [](Group& g) {
      if (g.rank() == 1) {
        auto rx = post_peer_recvs(g);
        ASSERT_TRUE(g.store().get("abort/done", kStepTimeout).ok()) << "rank 0 never aborted";
        expect_peer_sees_close(g);
        return;
      }
      abort_while_waiting(g);
      ASSERT_TRUE(g.store().set("abort/done", "1").ok());
    });
    return;
  }
  auto g = make_groups(tc(), 2);
  ASSERT_EQ(g.size(), 2u);
  auto rx = post_peer_recvs(*g[1]);
  abort_while_waiting(*g[0]);
  expect_peer_sees_close(*g[1]);
}

TEST_P(Abort, WakesAnIdleWaiter) {
  if (is_process_row(tc())) {
    run_ranks(tc(), 2, [](Group& g) {
      if (g.rank() == 0) abort_idle(g);
    });
    return;
  }
  auto g = make_groups(tc(), 2);
  ASSERT_EQ(g.size(), 2u);
  abort_idle(*g[0]);
}

INSTANTIATE_TEST_SUITE_P(Tr, Abort, ::testing::ValuesIn(built_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Abort);

}  // namespace
}  // namespace gw::conformance
