// Group::create over the real TCP driver: every pair connected, one message each way checked,
// and a missing rank named within the timeout. Suite 'tcp' (needs drivers/tcp).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "gw_group.h"

namespace gw {
namespace {

using namespace std::chrono_literals;

constexpr char kSpec[] = "tcp:iface=lo";
constexpr Nanos kTimeout = 30s;  // only reached when a test is broken

uint64_t value_of(int src, int dst) {
  return 0x5eed000000000000ULL | (static_cast<uint64_t>(src) << 16) | static_cast<uint64_t>(dst);
}

// Sends value_of(rank, p) to every peer p and checks value_of(p, rank) came from each.
void exchange_all(Group& g, const std::string& prefix = "gw") {
  int n = g.size(), me = g.rank();
  std::vector<uint64_t> out(n), in(n, 0);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    out[p] = value_of(me, p);
    RecvRequest rr{&in[p], sizeof(uint64_t), 7, static_cast<uint64_t>(1000 + p), nullptr};
    ASSERT_EQ(g.endpoint(p).post_recv({&rr, 1}).value(), 1u);
    SendRequest sr{&out[p], sizeof(uint64_t), 7, static_cast<uint64_t>(p), nullptr};
    ASSERT_EQ(g.endpoint(p).post_send({&sr, 1}).value(), 1u);
  }
  int pending = 2 * (n - 1);
  Completion cs[8];
  while (pending > 0) {
    auto got = g.transport().cq().wait(cs, kTimeout);
    ASSERT_TRUE(got.ok()) << "rank " << me << ": " << got.status().to_string();
    for (size_t i = 0; i < *got; ++i) {
      ASSERT_EQ(cs[i].code, Code::kOk) << "rank " << me << " peer " << cs[i].peer_id << " op "
                                       << int(cs[i].op) << " wr_id " << cs[i].wr_id;
      --pending;
    }
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    EXPECT_EQ(in[p], value_of(p, me)) << "rank " << me << " from " << p;
  }
  // No rank closes its endpoints before every rank has its messages (a peer leaving early is
  // reported to the others as an endpoint error).
  std::vector<std::string> done;
  for (int p = 0; p < n; ++p) done.push_back(prefix + "/done/" + std::to_string(p));
  ASSERT_TRUE(g.store().set(done[me], "").ok());
  ASSERT_TRUE(g.store().wait(done, kTimeout).ok());
}

TEST(Group, AllPairsConnectAndExchange) {
  for (int size = 2; size <= 4; ++size) {
    SCOPED_TRACE("size " + std::to_string(size));
    auto store = make_in_process_store();
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        auto t = Transport::open(kSpec);
        ASSERT_TRUE(t.ok()) << t.status().to_string();
        auto g = Group::create(store, std::move(*t), r, size, kTimeout);
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        exchange_all(**g);
      });
    }
    for (auto& t : threads) t.join();
  }
}

TEST(Group, MissingRankIsNamedWithinTheTimeout) {
  auto store = make_in_process_store();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto t = Transport::open(kSpec);
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      auto g = Group::create(store, std::move(*t), r, 3, 300ms);
      ASSERT_FALSE(g.ok());
      EXPECT_EQ(g.status().code(), Code::kTimeout);
      EXPECT_NE(g.status().message().find("rank 2 never published"), std::string_view::npos)
          << g.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
}

TEST(Group, TwoGroupsOverOneStoreWithDifferentPrefixes) {
  auto store = make_in_process_store();
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      auto t = Transport::open(kSpec);
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      // Ranks 0,1 form group "a", ranks 2,3 group "b", on one store.
      std::string prefix = r < 2 ? "a" : "b";
      auto g = Group::create(store, std::move(*t), r % 2, 2, kTimeout, prefix);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      exchange_all(**g, prefix);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace gw
