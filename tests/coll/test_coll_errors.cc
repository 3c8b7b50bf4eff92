// Failure behaviour: mismatched calls give a clear error (never silent corruption), a rank
// that dies mid-allreduce makes every other rank fail within the collective's timeout.
#include <atomic>
#include <chrono>

#include "coll_harness.h"

namespace gw::coll_test {
namespace {

TEST(CollErrors, MismatchedCountsAreReported) {
  for (Algo algo : {Algo::kRing, Algo::kRecursiveDoubling}) {
    std::vector<Status> st(2);
    run_ranks(2, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
      const size_t count = r == 0 ? 1000 : 2000;
      std::vector<float> in(count, 1.f), out(count);
      st[static_cast<size_t>(r)] = rk->comm->allreduce(
          in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum, {.algo = algo});
    });
    for (auto& s : st) {
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << algo_name(algo) << ": " << s.to_string();
      EXPECT_NE(s.message().find("count=1000"), std::string_view::npos) << s.to_string();
      EXPECT_NE(s.message().find("count=2000"), std::string_view::npos) << s.to_string();
    }
  }
}

TEST(CollErrors, MismatchedDtypeOrCollectiveIsReported) {
  std::vector<Status> st(3);
  run_ranks(3, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    std::vector<int32_t> in(64, 1), out(64 * 3);
    if (r == 1) {
      st[1] = rk->comm->allgather(in.data(), out.data(), 64, DataType::kInt32);
    } else {
      st[static_cast<size_t>(r)] =
          rk->comm->allreduce(in.data(), out.data(), 64,
                              r == 0 ? DataType::kFloat32 : DataType::kInt32, ReduceOp::kSum);
    }
  });
  // Every rank fails; the ranks that exchange descriptors with a mismatched peer say so and
  // name both calls, the others see that peer leave (RemoteError) — none succeeds silently.
  int clear = 0;
  for (int r = 0; r < 3; ++r) {
    auto& s = st[static_cast<size_t>(r)];
    EXPECT_FALSE(s.ok()) << "rank " << r;
    if (s.code() == Code::kInvalidArgument) {
      EXPECT_NE(s.message().find("but this rank called"), std::string_view::npos) << s.to_string();
      ++clear;
    }
  }
  EXPECT_GE(clear, 1);
}

// Without the descriptor exchange the message lengths still catch the mismatch.
TEST(CollErrors, MismatchedCountsWithoutDescriptorsFailOnLength) {
  std::vector<Status> st(2);
  CommOptions o = small_chunks();
  o.check_args = 0;
  o.timeout = Millis(3000);
  run_ranks(2, o, [&](int r, std::unique_ptr<Rank>& rk) {
    const size_t count = r == 0 ? 100 : 200;
    std::vector<float> in(count, 1.f), out(count);
    st[static_cast<size_t>(r)] = rk->comm->allreduce(
        in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum, {.algo = Algo::kRing});
  });
  for (auto& s : st) EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
}

TEST(CollErrors, DeadRankFailsEveryOtherRankWithinTimeout) {
  for (int n : {3, 4}) {
    const int victim = n - 1;
    const auto timeout = Millis(4000);
    std::vector<Status> st(static_cast<size_t>(n));
    std::vector<double> secs(static_cast<size_t>(n));
    CommOptions o;
    o.chunk_bytes = 64 << 10;
    o.timeout = timeout;
    const size_t count = 2 << 20;
    // Buffers outlive the ranks' Groups (gw_coll.h: a failed call's buffers may still be
    // written until its Group is destroyed: a peer's RDMA write under way lands anyway).
    std::vector<std::vector<float>> ins(static_cast<size_t>(n), std::vector<float>(count, 1.f)),
        outs(static_cast<size_t>(n), std::vector<float>(count));
    run_ranks(n, o, [&](int r, std::unique_ptr<Rank>& rk) {
      std::vector<float>& in = ins[static_cast<size_t>(r)];
      std::vector<float>& out = outs[static_cast<size_t>(r)];
      if (r == victim) {
        auto h = rk->comm->allreduce_async(in.data(), out.data(), count, DataType::kFloat32,
                                           ReduceOp::kSum, {.algo = Algo::kRing});
        ASSERT_TRUE(h.ok());
        for (int i = 0; i < 20; ++i) (void)rk->comm->progress();
        rk.reset();  // communicator, then group and transport: its sockets close
        return;
      }
      auto t0 = std::chrono::steady_clock::now();
      st[static_cast<size_t>(r)] = rk->comm->allreduce(
          in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum, {.algo = Algo::kRing});
      secs[static_cast<size_t>(r)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // The communicator stays broken with the first error.
      EXPECT_FALSE(rk->comm->barrier().ok());
    });
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      const auto& s = st[static_cast<size_t>(r)];
      EXPECT_FALSE(s.ok()) << n << " ranks, rank " << r;
      EXPECT_TRUE(s.code() == Code::kRemoteError || s.code() == Code::kTimeout) << s.to_string();
      // Names the peer that left: the victim, or a neighbour that already failed and left.
      if (s.code() == Code::kRemoteError) {
        EXPECT_NE(s.message().find("rank "), std::string_view::npos) << s.to_string();
        EXPECT_EQ(s.rank(), victim) << s.to_string();  // a notice names it, not the neighbour
      }
      EXPECT_LT(secs[static_cast<size_t>(r)], 4.0 + 2.0) << "rank " << r << ": " << s.to_string();
    }
  }
}

TEST(CollErrors, RankThatNeverCallsGivesTimeout) {
  std::atomic<bool> done{false};
  Status st;
  CommOptions o = small_chunks();
  o.timeout = Millis(300);
  run_ranks(2, o, [&](int r, std::unique_ptr<Rank>& rk) {
    if (r == 1) {
      while (!done) std::this_thread::sleep_for(Millis(5));
      return;
    }
    float x = 1, y = 0;
    st = rk->comm->allreduce(&x, &y, 1, DataType::kFloat32, ReduceOp::kSum);
    done = true;
  });
  EXPECT_EQ(st.code(), Code::kTimeout) << st.to_string();
  EXPECT_NE(st.message().find("allreduce"), std::string_view::npos) << st.to_string();
  EXPECT_EQ(st.rank(), 1) << st.to_string();  // the rank it waited on, which said nothing
}

TEST(CollErrors, BadArguments) {
  run_ranks(2, small_chunks(), [&](int, std::unique_ptr<Rank>& rk) {
    float x = 0;
    EXPECT_EQ(rk->comm->allreduce(nullptr, &x, 1, DataType::kFloat32, ReduceOp::kSum).code(),
              Code::kInvalidArgument);
    EXPECT_EQ(rk->comm->broadcast(&x, 1, DataType::kFloat32, 2).code(), Code::kInvalidArgument);
    EXPECT_EQ(rk->comm->wait(CollHandle{}, Millis(1)).code(), Code::kInvalidArgument);
    EXPECT_TRUE(rk->comm->barrier().ok());
  });
}

}  // namespace
}  // namespace gw::coll_test
