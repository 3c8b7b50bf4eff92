// tcp: after kUnwatchAfter busy polls in a row a transport takes its streams out of the epoll
// set (no wake-up callback per arriving packet). Whatever happens next must still be heard: a
// wait that sleeps, a caller that sleeps on wait_fd() itself, a send that must wait for room.
// Over one stream, two (striped) and TLS; every byte checked.
#include <poll.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <functional>
#include <thread>

#include "conformance.h"
#include "tcp_transport.h"

namespace gw::conformance {
namespace {

using TcpUnwatch = TransportTest;
using drv::tcp::TcpTransport;

uint64_t unwatches(Transport& t) { return t.stats()["epoll_unwatches"]; }

// Busy polls with nothing to do, as a spinning rank between messages: the streams leave epoll.
void spin_idle(Transport& t) {
  std::array<Completion, 4> out;
  for (uint32_t i = 0; i < 3 * TcpTransport::kUnwatchAfter; ++i) {
    auto n = t.cq().poll(out);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    ASSERT_EQ(*n, 0u);
  }
  ASSERT_GE(unwatches(t), 1u) << "busy polling never took the streams out of epoll";
}

// The peer's side, in its own thread: after `delay`, send `len` bytes and wait for the send.
std::thread send_later(Group& g, int to, const std::vector<uint8_t>& buf, Millis delay) {
  return std::thread([&g, to, &buf, delay] {
    std::this_thread::sleep_for(delay);
    SendRequest s{buf.data(), buf.size(), 5, 77, nullptr};
    auto n = g.endpoint(to).post_send({&s, 1});
    ASSERT_TRUE(n.ok() && *n == 1) << n.status().to_string();
    std::array<Completion, 4> out;
    auto k = g.transport().cq().wait(out, std::chrono::seconds(30));
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    EXPECT_EQ(out[0].code, Code::kOk);
  });
}

void expect_received(const Completion& c, const std::vector<uint8_t>& buf, uint64_t seed) {
  EXPECT_EQ(c.code, Code::kOk) << c.wr_id;
  EXPECT_EQ(c.op, Op::kRecv);
  EXPECT_EQ(c.len, buf.size());
  EXPECT_EQ(check_pattern(buf.data(), buf.size(), seed), "");
}

// Rank 0 spins until its streams leave epoll and posts a receive of `len` bytes; rank 1 sends
// it 200 ms later, while rank 0 waits with `step` (a sleep of up to 5 s, then a poll) until a
// completion. The message must arrive whole, and long before the sleep would end unheard.
void arrival_during(const TransportCase& tc, size_t len,
                    const std::function<Result<size_t>(Transport&, std::span<Completion>)>& step) {
  auto g = make_groups(tc, 2);
  ASSERT_EQ(g.size(), 2u);
  Transport& a = g[0]->transport();
  ASSERT_NO_FATAL_FAILURE(spin_idle(a));
  const uint64_t seed = 100 + len;
  std::vector<uint8_t> sbuf(len), rbuf(len);
  fill_pattern(sbuf.data(), len, seed);
  RecvRequest r{rbuf.data(), len, 5, 1, nullptr};
  ASSERT_TRUE(g[0]->endpoint(1).post_recv({&r, 1}).ok());
  const auto start = Clock::now();
  std::thread peer = send_later(*g[1], 0, sbuf, Millis(200));
  std::array<Completion, 4> out;
  size_t got = 0;
  while (got == 0 && Clock::now() - start < std::chrono::seconds(20)) {
    auto n = step(a, out);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    got = *n;
  }
  const auto took = Clock::now() - start;
  peer.join();
  ASSERT_EQ(got, 1u);
  expect_received(out[0], rbuf, seed);
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "the arrival waited for the sleep's end";
}

TEST_P(TcpUnwatch, SleepingInTheDriverHearsAnArrival) {
  arrival_during(tc(), 4096, [](Transport& a, std::span<Completion> out) {
    return a.cq().sleep_poll(out, 5000);  // must bring the streams back into epoll first
  });
}

TEST_P(TcpUnwatch, AWaitWithoutSpinHearsAnArrival) {
  arrival_during(tc(), 70000, [](Transport& a, std::span<Completion> out) {
    return a.cq().wait(out, std::chrono::seconds(5), Nanos(0));  // straight to sleeping
  });
}

TEST_P(TcpUnwatch, ACallerSleepingOnWaitFdHearsAnArrival) {
  // An event loop of its own: sleep on the fd, poll when it fires.
  arrival_during(tc(), 100, [](Transport& a, std::span<Completion> out) -> Result<size_t> {
    pollfd p{a.cq().wait_fd(), POLLIN, 0};
    if (::poll(&p, 1, 5000) < 0) return Status(Code::kSystemError, "poll", errno);
    return a.cq().poll(out);
  });
}

TEST_P(TcpUnwatch, ASendThatFillsTheSocketFinishes) {
  auto g = make_groups(tc(), 2);
  ASSERT_EQ(g.size(), 2u);
  Transport& a = g[0]->transport();
  ASSERT_NO_FATAL_FAILURE(spin_idle(a));
  // Far beyond both socket buffers, and the peer reads only when told: the sender meets
  // EAGAIN and must hear EPOLLOUT when the peer drains its socket.
  constexpr size_t kLen = 64 << 20;
  std::vector<uint8_t> sbuf(kLen), rbuf(kLen);
  fill_pattern(sbuf.data(), kLen, 555);
  Completion rc{};
  std::atomic<bool> go{false};
  std::jthread peer([&] {
    Deadline told(std::chrono::seconds(5));
    while (!go && !told.expired()) std::this_thread::sleep_for(Millis(1));
    RecvRequest r{rbuf.data(), kLen, 6, 2, nullptr};
    ASSERT_TRUE(g[1]->endpoint(0).post_recv({&r, 1}).ok());
    std::array<Completion, 4> out;
    auto k = g[1]->transport().cq().wait(out, std::chrono::seconds(30));
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    rc = out[0];
  });
  SendRequest s{sbuf.data(), kLen, 6, 9, nullptr};
  ASSERT_TRUE(g[0]->endpoint(1).post_send({&s, 1}).ok());
  std::array<Completion, 4> out;
  size_t got = 0;
  auto spin = [&](Nanos t) {  // busy, as a spinning rank: never sleeps
    Deadline d(t);
    while (got == 0 && !d.expired()) {
      auto n = a.cq().poll(out);
      ASSERT_TRUE(n.ok()) << n.status().to_string();
      got = *n;
    }
  };
  ASSERT_NO_FATAL_FAILURE(spin(Millis(200)));
  ASSERT_EQ(got, 0u) << "64 MiB went into the sockets of a peer that did not read";
  const uint64_t unwatched = a.stats()["streams_unwatched"];
  go = true;
  ASSERT_NO_FATAL_FAILURE(spin(std::chrono::seconds(30)));
  peer.join();
  ASSERT_EQ(got, 1u) << "the send never finished";
  EXPECT_EQ(out[0].code, Code::kOk);
  EXPECT_EQ(out[0].wr_id, 9u);
  EXPECT_EQ(unwatched, 0u) << "a send waiting for room must be watched";
  expect_received(rc, rbuf, 555);
}

// Rows with at most TcpTransport::kDirectStreams streams: more are always watched.
std::vector<TransportCase> unwatch_cases() {
  if (built_cases("tcp").empty()) return {};
  return {{"tcp", "tcp", "tcp:iface=lo"},
          {"tcp_streams2", "tcp", "tcp:iface=lo,streams=2"},
          {"tcp_tls", "tcp", "tcp:iface=lo,tls=on", "conformance key"}};
}

INSTANTIATE_TEST_SUITE_P(Tr, TcpUnwatch, ::testing::ValuesIn(unwatch_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TcpUnwatch);

}  // namespace
}  // namespace gw::conformance
