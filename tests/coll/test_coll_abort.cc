// Abort and failure notices (lib/coll/coll_notice.h): abort() from another thread ends every
// rank's blocked call within 200 ms, naming the aborting rank; a dead or stopped rank is
// named (Status::rank()) by every survivor, including those not connected to it in the ring,
// while the survivors stay alive after their error (as a trainer that catches it does).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "coll_harness.h"

namespace gw::coll_test {
namespace {

// The 200 ms bound is the product's, checked in plain builds. Under ThreadSanitizer 8 rank
// threads and their progress threads on 2 cores run ~10x slower (rank 0 of 8 returned after
// 235 ms in 1 CI rehearsal of 3); there the test checks that every rank returns, named.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr double kAbortBound = 1.0;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr double kAbortBound = 1.0;
#else
constexpr double kAbortBound = 0.2;
#endif
#else
constexpr double kAbortBound = 0.2;
#endif

using Secs = std::chrono::duration<double>;

// Ranks 1.. block in an allreduce that rank 0 never joins; rank 0 blocks in a receive that
// no one sends. A thread aborts rank 0 while all of them are blocked. @return the slowest
// rank's time from abort() to its return.
double abort_case(int n) {
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<Clock::time_point> end(static_cast<size_t>(n));
  std::atomic<int> blocked{0};
  std::atomic<Communicator*> victim{nullptr};
  Clock::time_point aborted_at;
  CommOptions o = small_chunks();
  o.timeout = Millis(20000);
  std::thread aborter([&] {
    while (blocked.load() < n || !victim.load()) std::this_thread::sleep_for(Millis(5));
    std::this_thread::sleep_for(Millis(100));  // every rank inside its wait
    aborted_at = Clock::now();
    victim.load()->abort("test abort");
  });
  run_ranks(n, o, [&](int r, std::unique_ptr<Rank>& rk) {
    Status s;
    if (r == 0) {
      uint8_t buf[8];
      auto h = rk->comm->recv_async(buf, sizeof(buf), 1, 77);
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      victim = rk->comm.get();
      ++blocked;
      s = rk->comm->wait(*h, Millis(10000));
    } else {
      float x = 1, y = 0;
      auto h = rk->comm->allreduce_async(&x, &y, 1, DataType::kFloat32, ReduceOp::kSum);
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      ++blocked;
      s = rk->comm->wait(*h, Millis(10000));
    }
    end[static_cast<size_t>(r)] = Clock::now();
    st[static_cast<size_t>(r)] = s;
  });
  aborter.join();
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), Code::kAborted) << n << " ranks, rank " << r << ": " << s.to_string();
    EXPECT_EQ(s.rank(), 0) << "rank " << r << ": " << s.to_string();
    EXPECT_NE(s.message().find("test abort"), std::string_view::npos) << s.to_string();
    worst = std::max(worst, Secs(end[static_cast<size_t>(r)] - aborted_at).count());
  }
  return worst;
}

// Every rank returns 2-22 ms after abort() on a quiet machine. A shared 2-vCPU VM stalls now
// and then for longer than the bound: in 1 CI rehearsal all 8 ranks of coll-dpdk, the
// aborting one too, returned together 0.27 s after abort(), where 30 local runs took <= 22 ms.
// A stall passes on the second try; a slow abort path fails both.
TEST(CollAbort, EveryRankReturnsWithin200ms) {
  for (int n : {2, 3, 4, 8}) {
    double worst = abort_case(n);
    if (worst >= kAbortBound) {
      std::printf("%d ranks: the slowest rank returned %.3f s after abort(); trying again\n", n,
                  worst);
      worst = abort_case(n);
    }
    EXPECT_LT(worst, kAbortBound) << n << " ranks: the slowest rank returned " << worst
                                  << " s after abort(), twice";
  }
}

TEST(CollAbort, AbortBeforeAnyCallBreaksTheNextOne) {
  run_ranks(2, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    if (r == 1) rk->comm->abort("early");
    float x = 1, y = 0;
    Status s = rk->comm->allreduce(&x, &y, 1, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), Code::kAborted) << "rank " << r << ": " << s.to_string();
    EXPECT_EQ(s.rank(), 1) << s.to_string();
    EXPECT_EQ(rk->comm->status().rank(), 1);
  });
}

// One rank dies (kill) or stops driving its transport (a stopped process: its sockets stay
// open, nothing is read or sent) in the middle of a loop of allreduces; the survivors catch
// the error and stay alive. Ring of 4: ranks 0 and 2 are not the victim's ring neighbours.
void culprit_case(bool kill) {
  const int n = 4, victim = 1;
  const auto timeout = Millis(1500);
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<Clock::time_point> end(static_cast<size_t>(n));
  std::atomic<bool> done{false};
  std::atomic<int> errored{0};
  Clock::time_point at;
  CommOptions o;
  o.chunk_bytes = 64 << 10;
  o.timeout = timeout;
  const size_t count = 256 << 10;  // 1 MiB: the ring
  // Buffers outlive the ranks' Groups (gw_coll.h: a failed call's buffers may still be written
  // until its Group is destroyed: a peer's RDMA write under way lands regardless).
  std::vector<std::vector<float>> ins(static_cast<size_t>(n), std::vector<float>(count, 1.f)),
      outs(static_cast<size_t>(n), std::vector<float>(count));
  run_ranks(n, o, [&](int r, std::unique_ptr<Rank>& rk) {
    std::vector<float>& in = ins[static_cast<size_t>(r)];
    std::vector<float>& out = outs[static_cast<size_t>(r)];
    auto one = [&] {
      return rk->comm->allreduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum,
                                 {.algo = Algo::kRing});
    };
    if (r == victim) {
      for (int i = 0; i < 5; ++i) ASSERT_TRUE(one().ok());
      auto h = rk->comm->allreduce_async(in.data(), out.data(), count, DataType::kFloat32,
                                         ReduceOp::kSum, {.algo = Algo::kRing});
      ASSERT_TRUE(h.ok());
      for (int i = 0; i < 3; ++i) (void)rk->comm->progress();  // in the middle of it
      at = Clock::now();
      if (kill) {
        rk.reset();  // sockets close, as the kernel closes a killed process's
      } else {
        while (!done) std::this_thread::sleep_for(Millis(5));  // stopped: alive, silent
      }
      return;
    }
    Status s;
    while (s.ok()) s = one();
    end[static_cast<size_t>(r)] = Clock::now();
    st[static_cast<size_t>(r)] = s;
    // Alive after the error (run_ranks keeps the communicator until every rank is done), as
    // a trainer that caught it; the stopped victim's silence ends with the last survivor's.
    if (++errored == n - 1) done = true;
  });
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const Status& s = st[static_cast<size_t>(r)];
    const double took = Secs(end[static_cast<size_t>(r)] - at).count();
    EXPECT_EQ(s.rank(), victim) << (kill ? "kill" : "stop") << ", rank " << r << ": "
                                << s.to_string();
    if (kill) {
      EXPECT_EQ(s.code(), Code::kRemoteError) << s.to_string();
      EXPECT_LT(took, 2.0) << "rank " << r << ": " << s.to_string();
    } else {
      // Timeout; RemoteError where the driver finds the silent peer first (dpdk's own
      // peer_timeout_ms, 1.5 s by default): the culprit is the same.
      EXPECT_TRUE(s.code() == Code::kTimeout || s.code() == Code::kRemoteError) << s.to_string();
      EXPECT_LT(took, Secs(timeout).count() + 1.0) << "rank " << r << ": " << s.to_string();
    }
  }
}

TEST(CollAbort, KilledRankIsNamedByEverySurvivor) { culprit_case(true); }
TEST(CollAbort, StoppedRankIsNamedByEverySurvivor) { culprit_case(false); }

}  // namespace
}  // namespace gw::coll_test
