// Conformance of the data path: sizes, many outstanding requests, ordering, too-small
// receives, timeouts and properties, on every built transport.
#include <algorithm>
#include <chrono>

#include "conformance.h"

namespace gw::conformance {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Drive progress for a while so that messages already sent land as unexpected ones.
void drain_progress(Group& g) {
  std::array<Completion, 4> out;
  auto n = g.transport().cq().wait(out, Millis(50));
  ASSERT_FALSE(n.ok()) << "rank " << g.rank() << ": unexpected completion";
  EXPECT_EQ(n.status().code(), Code::kTimeout) << n.status().to_string();
}

void run_and_verify(Exchange& x) {
  Status s = x.run();
  ASSERT_TRUE(s.ok()) << s.to_string();
  x.verify();
  EXPECT_TRUE(x.endpoint_errors().empty())
      << x.endpoint_errors().size() << " endpoint errors, first from peer "
      << x.endpoint_errors()[0].peer_id;
}

using SendRecvRanks = RanksTest;

// Every rank sends every size to every peer; sizes 0, 1, odd, and past 1 MiB.
TEST_P(SendRecvRanks, AllPairsAllSizes) {
  const std::vector<size_t> sizes = {0, 1, 3, 255, 4097, 65537, kMiB + 7};
  run_ranks(tc(), ranks(), [&](Group& g) {
    Exchange x(g);
    for (int p = 0; p < g.size(); ++p) {
      if (p == g.rank()) continue;
      for (uint64_t k = 0; k < sizes.size(); ++k) {
        x.recv(p, k, sizes[k] + (k % 2 ? 0 : 100), k, sizes[k]);  // exact and roomy buffers
        x.send(p, k, sizes[k], k);
      }
    }
    run_and_verify(x);
  });
}

INSTANTIATE_TEST_SUITE_P(Tr, SendRecvRanks,
                         ::testing::Combine(::testing::ValuesIn(built_cases()),
                                            ::testing::Range(2, 9)),
                         ranks_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SendRecvRanks);

using SendRecv = TransportTest;

TEST_P(SendRecv, SixtyFourMiBBothWays) {
  run_ranks(tc(), 2, [&](Group& g) {
    Exchange x(g);
    int peer = 1 - g.rank();
    x.recv(peer, 9, 64 * kMiB, 0, 64 * kMiB);
    x.send(peer, 9, 64 * kMiB, 0);
    run_and_verify(x);
  });
}

// 500 sends and 500 receives per rank posted before any polling; where an endpoint takes
// fewer, the rest are posted as completions free room.
TEST_P(SendRecv, HundredsOutstanding) {
  constexpr int kCount = 500;
  run_ranks(tc(), 2, [&](Group& g) {
    Exchange x(g);
    int peer = 1 - g.rank();
    for (int i = 0; i < kCount; ++i) {
      size_t len = static_cast<size_t>(i * 61) % 1500;
      x.recv(peer, i % 7, len, i, len);
    }
    for (int i = 0; i < kCount; ++i) x.send(peer, i % 7, static_cast<size_t>(i * 61) % 1500, i);
    run_and_verify(x);
  });
}

// More than an endpoint's queues hold: the first post takes fewer than asked, the rest go in
// as completions free room, and nothing is lost or reordered.
TEST_P(SendRecv, MoreThanTheQueuesHold) {
  run_ranks(tc(), 2, [&](Group& g) {
    const size_t cap = g.transport().properties().max_outstanding;
    ASSERT_GT(cap, 0u);
    const size_t count = std::min<size_t>(2 * cap + 7, 20000);
    Exchange x(g);
    int peer = 1 - g.rank();
    for (size_t i = 0; i < count; ++i) x.recv(peer, 1, i % 301, i, i % 301);
    for (size_t i = 0; i < count; ++i) x.send(peer, 1, i % 301, i);
    Status s = x.post();
    ASSERT_TRUE(s.ok()) << s.to_string();
    size_t taken = 0;
    for (const Req& r : x.reqs()) taken += r.c.wr_id != 0;
    EXPECT_LT(taken, 2 * count) << "queues of " << cap << " took all " << 2 * count << " requests";
    run_and_verify(x);
  });
}

// Same tag, mixed sizes (some striped across streams): message i lands in receive i.
TEST_P(SendRecv, SameTagKeepsSendOrder) {
  constexpr int kCount = 300;
  auto len_of = [](int i) {
    return i % 10 == 0 ? 300 * 1024 + static_cast<size_t>(i) : static_cast<size_t>(i * 13) % 700;
  };
  run_ranks(tc(), 2, [&](Group& g) {
    Exchange x(g);
    int peer = 1 - g.rank();
    for (int i = 0; i < kCount; ++i) x.recv(peer, 42, len_of(i) + 16, i, len_of(i));
    for (int i = 0; i < kCount; ++i) x.send(peer, 42, len_of(i), i);
    run_and_verify(x);
  });
}

// A message longer than the receive fails that receive (InvalidArgument, len = message
// length), writes nothing past the buffer, and the endpoint carries on. Both arrival orders.
TEST_P(SendRecv, TooSmallReceiveFailsOnlyThatReceive) {
  const std::vector<size_t> lens = {100, 10, kMiB + 1, 5, 0};
  const std::vector<size_t> caps = {50, 50, 4096, 64, 0};
  run_ranks(tc(), 2, [&](Group& g) {
    for (int round = 0; round < 2; ++round) {
      const bool posted_first = round == 0;
      const std::string sent = "sent" + std::to_string(round);
      Exchange x(g);
      if (g.rank() == 1) {
        if (posted_first) await(g, "posted" + std::to_string(round));
        for (size_t i = 0; i < lens.size(); ++i) x.send(0, 3 + round, lens[i], i);
        run_and_verify(x);
        signal(g, sent);
      } else {
        for (size_t i = 0; i < lens.size(); ++i) {
          x.recv(1, 3 + round, caps[i], i, lens[i],
                 lens[i] > caps[i] ? Code::kInvalidArgument : Code::kOk);
        }
        if (posted_first) {
          Status s = x.post();  // post first, then let the sender go
          ASSERT_TRUE(s.ok()) << s.to_string();
          signal(g, "posted" + std::to_string(round));
        } else {
          await(g, sent);
          drain_progress(g);
        }
        run_and_verify(x);
        EXPECT_TRUE(g.endpoint(1).status().ok()) << g.endpoint(1).status().to_string();
      }
    }
    // The endpoint still works both ways.
    Exchange y(g);
    int peer = 1 - g.rank();
    y.recv(peer, 77, 1000, 0, 999);
    y.send(peer, 77, 999, 0);
    run_and_verify(y);
  });
}

TEST_P(SendRecv, WaitTimesOutWithinBound) {
  run_ranks(tc(), 2, [&](Group& g) {
    if (g.rank() == 1) {
      await(g, "timed_out");
      Exchange x(g);
      x.send(0, 5, 33, 0);
      run_and_verify(x);
      return;
    }
    std::array<Completion, 4> out;
    auto& cq = g.transport().cq();
    for (Nanos spin : {Nanos(0), Nanos(20'000), Nanos(Millis(300))}) {
      auto t0 = Clock::now();
      auto n = cq.wait(out, Millis(200), spin);
      auto ms = std::chrono::duration_cast<Millis>(Clock::now() - t0).count();
      ASSERT_FALSE(n.ok()) << "completion from an idle transport";
      EXPECT_EQ(n.status().code(), Code::kTimeout) << n.status().to_string();
      EXPECT_GE(ms, 199) << "wait returned early";
      EXPECT_LT(ms, 2000) << "wait overslept its 200 ms timeout";
    }
    auto t0 = Clock::now();
    auto z = cq.wait(out, Nanos(0));
    EXPECT_EQ(z.status().code(), Code::kTimeout);
    EXPECT_LT(Clock::now() - t0, Millis(500));

    // A posted receive with no sender times out too and stays posted.
    std::vector<uint8_t> buf(33 + kGuard, kGuardByte);
    RecvRequest rr{buf.data(), 33, 5, 1, nullptr};
    auto taken = g.endpoint(1).post_recv({&rr, 1});
    ASSERT_TRUE(taken.ok() && *taken == 1) << taken.status().to_string();
    auto n = cq.wait(out, Millis(100));
    EXPECT_EQ(n.status().code(), Code::kTimeout);
    signal(g, "timed_out");
    n = cq.wait(out, kStepTimeout);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    ASSERT_EQ(*n, 1u);
    EXPECT_EQ(out[0].wr_id, 1u);
    Req r;
    r.buf = buf;
    r.len = 33;
    r.c = out[0];
    Exchange::verify_recv(r, 1, 0, 5, 0, 33);
  });
}

TEST_P(SendRecv, SendWithAnyTagIsRejected) {
  run_ranks(tc(), 2, [&](Group& g) {
    if (g.rank() != 0) return;
    uint8_t b = 1;
    SendRequest s{&b, 1, kAnyTag, 1, nullptr};
    auto taken = g.endpoint(1).post_send({&s, 1});
    ASSERT_FALSE(taken.ok()) << "a send with kAnyTag was taken";
    EXPECT_EQ(taken.status().code(), Code::kInvalidArgument) << taken.status().to_string();
  });
}

void check_properties(Transport& t, const TransportCase& c) {
  const TransportProperties& p = t.properties();
  EXPECT_EQ(p.name, c.driver);
  EXPECT_GE(p.max_message_size, 64 * kMiB);
  EXPECT_GT(p.max_outstanding, 0u);
  EXPECT_EQ(t.address().driver(), c.driver);
  std::vector<uint8_t> buf(4096);
  auto mr = t.register_memory(buf.data(), buf.size(), MemKind::kHost);
  ASSERT_TRUE(mr.ok()) << mr.status().to_string();
  EXPECT_EQ(mr->addr(), buf.data());
  EXPECT_EQ(mr->length(), buf.size());
  EXPECT_EQ(mr->kind(), MemKind::kHost);
  EXPECT_TRUE(mr->contains(buf.data() + 100, 3996));
  EXPECT_FALSE(mr->contains(buf.data() + 100, 3997));
}

TEST_P(SendRecv, PropertiesAndRegistration) {
  if (is_process_row(tc())) {  // its device exists in the ranks' processes only
    run_ranks(tc(), 2, [&](Group& g) { check_properties(g.transport(), tc()); });
    return;
  }
  auto t = open_case(tc());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  check_properties(**t, tc());
}

INSTANTIATE_TEST_SUITE_P(Tr, SendRecv, ::testing::ValuesIn(built_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SendRecv);

}  // namespace
}  // namespace gw::conformance
