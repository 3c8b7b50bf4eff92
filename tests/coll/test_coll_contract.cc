// The collectives' contract where the headers alone left users guessing (gw_coll.h "Contract"):
// in-place reduce-scatter and allgather (NCCL's layout; any other overlap is refused), integer
// avg (the sum wraps first), fp16/bf16 (rounded after every step; every rank gets the same
// bits) and wait() (any wait drives every call in flight; handles in any order).
#include <cmath>
#include <cstring>
#include <limits>

#include "coll_harness.h"

namespace gw::coll_test {
namespace {

constexpr int kRanks = 3;

// recv = send + rank * recv_count: the rank's own block of its send buffer.
TEST(CollContract, InPlaceReduceScatterUsesTheRanksOwnBlock) {
  run_ranks(kRanks, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    const size_t count = 1009;  // several 1 KiB chunks, not a multiple of anything
    for (DataType dt : {DataType::kFloat32, DataType::kInt64, DataType::kBFloat16}) {
      const size_t es = dtype_size(dt);
      auto buf = make_input(dt, ReduceOp::kSum, r, count * kRanks);
      uint8_t* mine = buf.data() + static_cast<size_t>(r) * count * es;
      ASSERT_TRUE(rk->comm->reduce_scatter(buf.data(), mine, count, dt, ReduceOp::kSum).ok());
      for (size_t i = 0; i < count; ++i) {
        const size_t g = static_cast<size_t>(r) * count + i;
        ASSERT_EQ(to_double(dt, mine + i * es), reference(dt, ReduceOp::kSum, kRanks, g))
            << dtype_name(dt) << " rank " << r << " element " << i;
      }
    }
  });
}

// send = recv + rank * send_count: the rank's block is already in place.
TEST(CollContract, InPlaceAllgatherReadsTheRanksBlockInRecv) {
  run_ranks(kRanks, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    const size_t count = 777;
    std::vector<uint32_t> buf(count * kRanks, 0xDEADBEEF);
    for (size_t i = 0; i < count; ++i) buf[static_cast<size_t>(r) * count + i] = r * 100000 + i;
    const uint32_t* mine = buf.data() + static_cast<size_t>(r) * count;
    ASSERT_TRUE(rk->comm->allgather(mine, buf.data(), count, DataType::kInt32).ok());
    for (int q = 0; q < kRanks; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(buf[static_cast<size_t>(q) * count + i], static_cast<uint32_t>(q * 100000 + i))
            << "rank " << r << " block " << q << " element " << i;
  });
}

// Any other overlap of send and recv would read bytes already overwritten: refused at once,
// on the calling rank, before anything is sent (the communicator stays usable).
TEST(CollContract, OtherOverlapsAreRefused) {
  run_ranks(2, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    std::vector<float> buf(64 * 2 + 1, 1.0f);
    auto expect_refused = [&](const Status& st, const char* what) {
      EXPECT_EQ(st.code(), Code::kInvalidArgument)
          << what << " on rank " << r << ": " << st.to_string();
      EXPECT_NE(st.to_string().find("overlap"), std::string::npos) << st.to_string();
    };
    expect_refused(
        rk->comm->allreduce(buf.data(), buf.data() + 1, 64, DataType::kFloat32, ReduceOp::kSum),
        "allreduce shifted by one element");
    expect_refused(rk->comm->reduce_scatter(buf.data(), buf.data() + 1, 64, DataType::kFloat32,
                                            ReduceOp::kSum),
                   "reduce_scatter shifted by one element");
    expect_refused(rk->comm->allgather(buf.data() + 1, buf.data(), 64, DataType::kFloat32),
                   "allgather shifted by one element");
    // Still usable: a correct call after the refusals.
    std::vector<float> in(64, static_cast<float>(r + 1)), out(64);
    ASSERT_TRUE(
        rk->comm->allreduce(in.data(), out.data(), 64, DataType::kFloat32, ReduceOp::kSum).ok());
    for (float x : out) ASSERT_EQ(x, 3.0f);
  });
}

// Integer avg: the sum wraps modulo 2^bits (as integer sum does), then one truncating division.
TEST(CollContract, IntegerAvgWrapsThenDividesOnce) {
  run_ranks(2, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    for (Algo algo : {Algo::kRing, Algo::kRecursiveDoubling}) {
      const size_t count = 700;  // ring: several chunks
      std::vector<int32_t> in(count, std::numeric_limits<int32_t>::max()), out(count);
      in[1] = r == 0 ? -7 : 0;  // -7 / 2 truncates toward zero: -3
      ASSERT_TRUE(rk->comm
                      ->allreduce(in.data(), out.data(), count, DataType::kInt32, ReduceOp::kAvg,
                                  {algo, {}})
                      .ok());
      EXPECT_EQ(out[0], -1) << "(2^31-1) * 2 wraps to -2, / 2 = -1; " << algo_name(algo);
      EXPECT_EQ(out[1], -3) << algo_name(algo);
      std::vector<uint8_t> b(count, r == 0 ? 200 : 100), bo(count);
      ASSERT_TRUE(
          rk->comm
              ->allreduce(b.data(), bo.data(), count, DataType::kUInt8, ReduceOp::kAvg, {algo, {}})
              .ok());
      EXPECT_EQ(bo[0], 22) << "300 wraps to 44, / 2 = 22; " << algo_name(algo);
    }
  });
}

// fp16/bf16: each step adds in float32 and rounds to the narrow type. Whatever the order, every
// rank ends with the same bits, within (ranks - 1) roundings of the exact sum.
TEST(CollContract, HalfPrecisionSameBitsOnEveryRankWithinStepRounding) {
  constexpr int n = 4;
  constexpr size_t count = 3001;
  std::vector<std::vector<uint16_t>> got(n);
  auto value = [](int rank, size_t i) {
    return std::ldexp(
        static_cast<double>((i * 7919 + static_cast<size_t>(rank) * 104729) % 2001) - 1000.0, -7);
  };
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    for (Algo algo : {Algo::kRing, Algo::kRecursiveDoubling}) {
      run_ranks(n, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
        std::vector<uint16_t> in(count), out(count);
        for (size_t i = 0; i < count; ++i)
          from_double(dt, value(r, i), reinterpret_cast<uint8_t*>(&in[i]));
        ASSERT_TRUE(
            rk->comm->allreduce(in.data(), out.data(), count, dt, ReduceOp::kSum, {algo, {}}).ok());
        got[static_cast<size_t>(r)] = out;
      });
      const double ulp_rel = dt == DataType::kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
      for (size_t i = 0; i < count; ++i) {
        double exact = 0, mag = 0;
        for (int q = 0; q < n; ++q) {
          uint8_t h[8];
          from_double(dt, value(q, i), h);
          const double x = to_double(dt, h);  // the input as the narrow type holds it
          exact += x;
          mag += std::fabs(x);
        }
        const double v = to_double(dt, reinterpret_cast<const uint8_t*>(&got[0][i]));
        ASSERT_LE(std::fabs(v - exact), (n - 1) * ulp_rel * mag + 1e-12)
            << dtype_name(dt) << " " << algo_name(algo) << " element " << i;
        for (int q = 1; q < n; ++q)
          ASSERT_EQ(got[static_cast<size_t>(q)][i], got[0][i])
              << "rank " << q << " differs from rank 0 at " << i << " (" << dtype_name(dt) << ", "
              << algo_name(algo) << ")";
      }
    }
  }
}

// wait() on one handle drives every call in flight: ranks wait in opposite orders.
TEST(CollContract, WaitDrivesEveryCallInFlightInAnyOrder) {
  run_ranks(kRanks, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    const size_t count = 5000;
    auto a_in = make_input(DataType::kFloat32, ReduceOp::kSum, r, count);
    std::vector<uint8_t> a_out(a_in.size());
    std::vector<int64_t> g_in(300, r), g_out(300 * kRanks, -1);
    auto a = rk->comm->allreduce_async(a_in.data(), a_out.data(), count, DataType::kFloat32,
                                       ReduceOp::kSum);
    auto g = rk->comm->allgather_async(g_in.data(), g_out.data(), 300, DataType::kInt64);
    ASSERT_TRUE(a.ok() && g.ok());
    const Nanos t = Millis(20000);
    if (r % 2 == 0) {
      ASSERT_TRUE(rk->comm->wait(*g, t).ok());
      ASSERT_TRUE(rk->comm->wait(*a, t).ok());
    } else {
      ASSERT_TRUE(rk->comm->wait(*a, t).ok());
      ASSERT_TRUE(rk->comm->wait(*g, t).ok());
    }
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(to_double(DataType::kFloat32, a_out.data() + 4 * i),
                reference(DataType::kFloat32, ReduceOp::kSum, kRanks, i));
    for (size_t i = 0; i < g_out.size(); ++i) ASSERT_EQ(g_out[i], static_cast<int64_t>(i / 300));
  });
}

}  // namespace
}  // namespace gw::coll_test
