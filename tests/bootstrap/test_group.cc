// Group::create over the real TCP driver: every pair connected, one message each way checked,
// and a missing rank named within the timeout (Status::rank()); a rank process killed during
// set-up is named within a second over a launched job's TCP store, a stopped one at the
// timeout. Suite 'tcp' (needs drivers/tcp).
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "child_rank.h"
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
void exchange_all(Group& g, const std::string& prefix) {
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

// What one thread passes to Group::create.
struct Member {
  int rank, size;
  Nanos timeout;
  std::string prefix;
};
// One thread per member, all on one in-process store: each opens its own TCP transport, joins
// the group that group_of(thread index) describes and hands the result to body.
void run_threads(int threads, const std::function<Member(int)>& group_of,
                 const std::function<void(const Member&, Result<std::unique_ptr<Group>>)>& body) {
  auto store = make_in_process_store();
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) {
    ts.emplace_back([&, i] {
      auto t = Transport::open(kSpec);
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      Member m = group_of(i);
      body(m, Group::create(store, std::move(*t), m.rank, m.size, m.timeout, m.prefix));
    });
  }
  for (auto& t : ts) t.join();
}

TEST(Group, AllPairsConnectAndExchange) {
  for (int size = 2; size <= 4; ++size) {
    SCOPED_TRACE("size " + std::to_string(size));
    run_threads(
        size,
        [&](int i) {
          return Member{i, size, kTimeout, "gw"};
        },
        [](const Member& m, Result<std::unique_ptr<Group>> g) {
          ASSERT_TRUE(g.ok()) << g.status().to_string();
          exchange_all(**g, m.prefix);
        });
  }
}

TEST(Group, MissingRankIsNamedWithinTheTimeout) {
  // World of 3, only ranks 0 and 1 start.
  run_threads(
      2,
      [](int i) {
        return Member{i, 3, 300ms, "gw"};
      },
      [](const Member&, Result<std::unique_ptr<Group>> g) {
        ASSERT_FALSE(g.ok());
        EXPECT_EQ(g.status().code(), Code::kTimeout);
        EXPECT_NE(g.status().message().find("rank 2 never published"), std::string_view::npos)
            << g.status().to_string();
        EXPECT_EQ(g.status().rank(), 2) << g.status().to_string();
      });
}

// World of 3: rank 1 is a process hit by `sig` 300 ms into set-up, after `child` ran (it
// connected its store as rank 1); ranks 0 and 2 are threads here, creating the group.
// @return each thread's status and seconds from the signal to its return.
std::vector<std::pair<Status, double>> create_with_victim(int sig, Nanos timeout,
                                                          std::function<int(Store&)> child) {
  test::ChildRank victim([&](uint16_t port) {
    auto s = connect_tcp_store("127.0.0.1", port, kTimeout, StoreIdentity{1, 0});
    if (!s.ok()) return 1;
    return child(**s);
  });
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  if (!server.ok() || !victim.start((*server)->port())) return {};
  std::vector<Status> st(2);
  std::vector<Clock::time_point> done(2);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i) {
    ts.emplace_back([&, i] {
      auto s = connect_tcp_store("127.0.0.1", (*server)->port(), kTimeout, StoreIdentity{2 * i, 0});
      auto t = Transport::open(kSpec);
      if (!s.ok() || !t.ok()) {
        st[i] = s.ok() ? t.status() : s.status();
        return;
      }
      st[i] = Group::create(*s, std::move(*t), 2 * i, 3, timeout, "gw").status();
      done[i] = Clock::now();
    });
  }
  std::this_thread::sleep_for(300ms);
  auto hit = Clock::now();
  victim.signal(sig);
  for (auto& t : ts) t.join();
  std::vector<std::pair<Status, double>> out;
  for (int i = 0; i < 2; ++i)
    out.emplace_back(st[i], std::chrono::duration<double>(done[i] - hit).count());
  return out;
}

// The victim connected its store but never published its address (as a DPDK rank in EAL
// start-up), then hangs until it is hit.
int hang(Store&) {
  test::ChildRank::ready();
  for (;;) ::pause();
}

TEST(Group, RankKilledBeforePublishingIsNamedWithinASecond) {
  for (auto& [st, after] : create_with_victim(SIGKILL, 10s, hang)) {
    EXPECT_EQ(st.code(), Code::kRemoteError) << st.to_string();
    EXPECT_EQ(st.rank(), 1) << st.to_string();
    EXPECT_LT(after, 1.0) << st.to_string();
  }
}

TEST(Group, RankKilledAfterPublishingIsNamedWithinASecond) {
  // The victim publishes a real address (its transport listens) and hangs: the others get
  // past the store and block connecting to it when it dies.
  auto publish_and_hang = [](Store& s) {
    auto t = Transport::open(kSpec);
    if (!t.ok() || !s.set("gw/host/1", "here").ok() ||
        !s.set("gw/addr/1", (*t)->address().bytes()).ok())
      return 1;
    test::ChildRank::ready();
    for (;;) ::pause();
  };
  for (auto& [st, after] : create_with_victim(SIGKILL, 10s, publish_and_hang)) {
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.rank(), 1) << st.to_string();
    EXPECT_LT(after, 1.0) << st.to_string();
  }
}

TEST(Group, KilledServerRankIsNamedWithinASecondByRanksWaitingToBeDialled) {
  // World of 3 on a launched job's store, served by rank 0's process: rank 0 publishes a real
  // address and hangs, so ranks 1 and 2 get past the store and wait for it to dial them; its
  // death takes the store with it, and both must learn it from their store sessions.
  test::ChildRank server_rank([](uint16_t) {
    auto server = TcpStoreServer::start("127.0.0.1", 0);
    if (!server.ok()) return 1;
    auto s = connect_tcp_store("127.0.0.1", (*server)->port(), kTimeout, StoreIdentity{0, 0});
    auto t = Transport::open(kSpec);
    if (!s.ok() || !t.ok() || !(*s)->set("gw/host/0", "here").ok() ||
        !(*s)->set("gw/addr/0", (*t)->address().bytes()).ok())
      return 1;
    test::ChildRank::ready((*server)->port());
    for (;;) ::pause();
  });
  uint16_t port = 0;
  ASSERT_TRUE(server_rank.start(0, &port));
  std::vector<Status> st(2);
  std::vector<Clock::time_point> done(2);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i) {
    ts.emplace_back([&, i] {
      auto s = connect_tcp_store("127.0.0.1", port, kTimeout, StoreIdentity{i + 1, 0});
      auto t = Transport::open(kSpec);
      if (!s.ok() || !t.ok()) {
        st[i] = s.ok() ? t.status() : s.status();
        return;
      }
      st[i] = Group::create(*s, std::move(*t), i + 1, 3, 10s, "gw").status();
      done[i] = Clock::now();
    });
  }
  std::this_thread::sleep_for(300ms);
  auto hit = Clock::now();
  server_rank.signal(SIGKILL);
  for (auto& t : ts) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(st[i].ok()) << "rank " << i + 1;
    EXPECT_EQ(st[i].rank(), 0) << "rank " << i + 1 << ": " << st[i].to_string();
    EXPECT_LT(std::chrono::duration<double>(done[i] - hit).count(), 1.0)
        << "rank " << i + 1 << ": " << st[i].to_string();
  }
}

TEST(Group, StoppedRankIsNamedAtTheTimeout) {
  for (auto& [st, after] : create_with_victim(SIGSTOP, 1500ms, hang)) {
    EXPECT_EQ(st.code(), Code::kTimeout) << st.to_string();
    EXPECT_EQ(st.rank(), 1) << st.to_string();
    EXPECT_GT(after, 0.9) << st.to_string();
    EXPECT_LT(after, 2.5) << st.to_string();
  }
}

TEST(Group, TwoGroupsOverOneStoreWithDifferentPrefixes) {
  // Threads 0,1 form group "a", threads 2,3 group "b", on one store.
  run_threads(
      4,
      [](int i) {
        return Member{i % 2, 2, kTimeout, i < 2 ? "a" : "b"};
      },
      [](const Member& m, Result<std::unique_ptr<Group>> g) {
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        exchange_all(**g, m.prefix);
      });
}

}  // namespace
}  // namespace gw
