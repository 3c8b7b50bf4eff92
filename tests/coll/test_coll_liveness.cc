// Background progress (lib/transport/gw_progress.h): a rank that makes no gradwire call for
// 10 s between two calls -- a trainer loading data, evaluating, writing a checkpoint -- is not
// taken for dead, even with a collective of its own in flight meanwhile and its peer waiting
// on it (dpdk: nobody else acks or heartbeats for it). Results are checked element by element.
// With transport.progress=caller the dpdk row fails ("sent nothing for 1500 ms").
#include <chrono>

#include "coll_harness.h"

namespace gw::coll_test {
namespace {

constexpr auto kGap = Millis(10'000);

TEST(CollLiveness, ARankThatComputesTenSecondsBetweenCallsStaysAlive) {
  const int n = 2;
  const size_t big = 64 * 1024, small = 1000;
  CommOptions o = small_chunks();
  o.timeout = Millis(60'000);
  // Rank 1 starts a collective and computes without calling in; rank 0 finishes its part and
  // waits in the next collective for the whole gap, its requests pending on rank 1.
  run_ranks(n, o, [&](int r, std::unique_ptr<Rank>& rk) {
    EXPECT_TRUE(rk->group->transport().background())
        << "transport.progress=auto should give " << transport_spec() << " a progress thread";
    auto a = make_input(DataType::kFloat32, ReduceOp::kSum, r, big);
    std::vector<uint8_t> out(a.size());
    if (r == 1) {
      auto h =
          rk->comm->allreduce_async(a.data(), out.data(), big, DataType::kFloat32, ReduceOp::kSum);
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      std::this_thread::sleep_for(kGap);
      Status st = rk->comm->wait(*h, Millis(60'000));
      ASSERT_TRUE(st.ok()) << "rank 1 after its gap: " << st.to_string();
    } else {
      Status st =
          rk->comm->allreduce(a.data(), out.data(), big, DataType::kFloat32, ReduceOp::kSum);
      ASSERT_TRUE(st.ok()) << "rank 0, waiting for the computing rank: " << st.to_string();
    }
    EXPECT_EQ(check_result(DataType::kFloat32, ReduceOp::kSum, n, out.data(), big, "big"), 0u);
    // And the connection is still good for the next step.
    // Rank 0 waits in it for the whole gap.
    const auto t0 = Clock::now();
    auto b = make_input(DataType::kInt32, ReduceOp::kMax, r, small);
    std::vector<uint8_t> bout(b.size());
    Status st = rk->comm->allreduce(b.data(), bout.data(), small, DataType::kInt32, ReduceOp::kMax);
    ASSERT_TRUE(st.ok()) << "rank " << r << ", the step after: " << st.to_string();
    EXPECT_EQ(check_result(DataType::kInt32, ReduceOp::kMax, n, bout.data(), small, "next"), 0u);
    if (r == 0) {
      EXPECT_GE(Clock::now() - t0, kGap - Millis(1000)) << "rank 0 did not wait";
    }
    // Rank 1's thread served the peer during the gap (rank 0 was inside calls throughout).
    if (r == 1) {
      EXPECT_GT(rk->group->transport().background_passes(), 0u);
    }
  });
}

}  // namespace
}  // namespace gw::coll_test
