// Rank liveness over the TCP store (tcp_store_proto.h: HELLO ... BYE): a rank process that is
// killed fails the others' store waits within a second, naming it in Status::rank(); a stopped
// one is named at the timeout; a rank that finishes normally (destructor or exit()) is never
// reported; a killed rank 0 (the server) is named as the culprit by the clients. The victims
// are real processes: forked before this test starts any thread, then SIGKILLed or SIGSTOPped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "child_rank.h"
#include "gw_store.h"
#include "store_test_util.h"

namespace gw {
namespace {

using namespace std::chrono_literals;
using test::ChildRank;

using test::kLong;

Result<std::shared_ptr<Store>> connect_as(uint16_t port, int rank) {
  return connect_tcp_store("127.0.0.1", port, kLong, StoreIdentity{rank, 0});
}

// A rank that connects, says it is ready and then waits to be killed.
int connect_and_hang(uint16_t port) {
  auto s = connect_as(port, 1);
  if (!s.ok()) return 1;
  ChildRank::ready();
  for (;;) ::pause();
}

// Ranks 0 and 2 run store_barrier(size 3) in threads while the child, rank 1, is hit by `sig`
// after 200 ms. @return each thread's status and seconds from the signal to its return.
struct Outcome {
  Status st;
  Clock::time_point done;
  double after_s = 0;
};
std::vector<Outcome> barrier_with_victim(int sig, Nanos timeout) {
  ChildRank child(connect_and_hang);
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  if (!server.ok() || !child.start((*server)->port())) return {};
  std::vector<Outcome> out(2);
  Clock::time_point hit;
  std::vector<std::thread> th;
  for (int i = 0; i < 2; ++i) {
    th.emplace_back([&, i] {
      auto s = connect_as((*server)->port(), i * 2);
      if (!s.ok()) {
        out[i].st = s.status();
        return;
      }
      out[i].st = store_barrier(**s, "job/left", i * 2, 3, timeout);
      out[i].done = Clock::now();
    });
  }
  std::this_thread::sleep_for(200ms);
  hit = Clock::now();
  child.signal(sig);
  for (auto& t : th) t.join();
  for (auto& o : out) o.after_s = std::chrono::duration<double>(o.done - hit).count();
  return out;
}

TEST(StoreLiveness, KilledRankFailsTheBarrierWithinASecondNamingIt) {
  for (auto& o : barrier_with_victim(SIGKILL, 10s)) {
    EXPECT_EQ(o.st.code(), Code::kRemoteError) << o.st.to_string();
    EXPECT_EQ(o.st.rank(), 1) << o.st.to_string();
    EXPECT_LT(o.after_s, 1.0) << o.st.to_string();
    EXPECT_NE(o.st.message().find("rank 1 left the job"), std::string_view::npos)
        << o.st.to_string();
  }
}

TEST(StoreLiveness, StoppedRankIsNamedAtTheTimeout) {
  auto t0 = Clock::now();
  for (auto& o : barrier_with_victim(SIGSTOP, 800ms)) {
    EXPECT_EQ(o.st.code(), Code::kTimeout) << o.st.to_string();
    EXPECT_EQ(o.st.rank(), 1) << o.st.to_string();
    EXPECT_NE(o.st.message().find("rank 1 did not reach the store barrier"), std::string_view::npos)
        << o.st.to_string();
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(secs, 0.8);
  EXPECT_LT(secs, 2.5);
}

TEST(StoreLiveness, SeveralMissingRanksNameTheLowest) {
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto s = connect_as((*server)->port(), 0);
  ASSERT_TRUE(s.ok());
  Status st = store_barrier(**s, "few", 0, 4, 200ms);
  EXPECT_EQ(st.code(), Code::kTimeout);
  EXPECT_EQ(st.rank(), 1) << st.to_string();
  EXPECT_NE(st.message().find("ranks 1, 2, 3 did not"), std::string_view::npos) << st.to_string();
}

// Rank 1 finishes normally (its store destroyed, or exit() with the store still alive) while
// rank 0 still waits for rank 2: nobody is reported.
void finish_normally(bool destroy) {
  ChildRank child([destroy](uint16_t port) {
    auto s = connect_as(port, 1);
    if (!s.ok() || !(*s)->set("done/1", "1").ok()) return 1;
    ChildRank::ready();
    if (destroy) return 0;  // the store is destroyed on return, before _exit
    static std::shared_ptr<Store> kept = *s;
    std::exit(0);  // atexit says goodbye; `kept` is never destroyed
  });
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(child.start((*server)->port()));
  EXPECT_EQ(child.reap(), 0);
  auto s0 = connect_as((*server)->port(), 0);
  auto s2 = connect_as((*server)->port(), 2);
  ASSERT_TRUE(s0.ok() && s2.ok());
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    EXPECT_TRUE((*s2)->set("done/2", "1").ok());
  });
  const std::string keys[] = {"done/1", "done/2"};
  Status st = (*s0)->wait(keys, 5s);
  late.join();
  EXPECT_TRUE(st.ok()) << st.to_string();
}

TEST(StoreLiveness, RankDestroyingItsStoreIsNotReported) { finish_normally(true); }
TEST(StoreLiveness, RankExitingWithItsStoreAliveIsNotReported) { finish_normally(false); }

TEST(StoreLiveness, KilledServerRankIsNamedByTheClients) {
  ChildRank child([](uint16_t) {
    auto server = TcpStoreServer::start("127.0.0.1", 0);
    if (!server.ok()) return 1;
    ChildRank::ready((*server)->port());
    for (;;) ::pause();
  });
  uint16_t port = 0;
  ASSERT_TRUE(child.start(0, &port));
  auto s = connect_tcp_store("127.0.0.1", port, kLong, StoreIdentity{1, 0});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Clock::time_point hit;
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    hit = Clock::now();
    child.signal(SIGKILL);
  });
  auto got = (*s)->get("never", 10s);
  auto done = Clock::now();
  killer.join();
  double after = std::chrono::duration<double>(done - hit).count();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kRemoteError) << got.status().to_string();
  EXPECT_EQ(got.status().rank(), 0) << got.status().to_string();
  EXPECT_LT(after, 1.0);
  // Later requests cannot reconnect: still rank 0.
  Status later = (*s)->set("k", "v");
  EXPECT_EQ(later.rank(), 0) << later.to_string();
}

}  // namespace
}  // namespace gw
