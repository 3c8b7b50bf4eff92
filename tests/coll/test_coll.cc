// Collectives over TCP loopback with 1..8 ranks (threads): every rank checks element by element
// against a float64 reference and all ranks must hold the same bytes.
#include <atomic>
#include <mutex>

#include "coll_harness.h"

namespace gw::coll_test {
namespace {

uint64_t fnv(uint64_t h, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::vector<size_t> sizes_for(DataType dt, int n) {
  const size_t ce = static_cast<size_t>(kChunkBytes) / dtype_size(dt);
  return {0, 1, 1009, ce - 1, ce + 1, 2 * ce * static_cast<size_t>(n) + 3};
}

class AllreduceRanks : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceRanks, EveryDtypeOpSizeAndAlgo) {
  const int n = GetParam();
  std::vector<uint64_t> digest(static_cast<size_t>(n));
  std::atomic<size_t> wrong{0};
  run_ranks(n, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    uint64_t h = 1469598103934665603ull;
    int k = 0;
    for (Algo algo : {Algo::kRing, Algo::kRecursiveDoubling}) {
      for (int t = 0; t < kNumDataTypes; ++t) {
        for (int o = 0; o < kNumReduceOps; ++o) {
          const auto dt = static_cast<DataType>(t);
          const auto op = static_cast<ReduceOp>(o);
          for (size_t count : sizes_for(dt, n)) {
            auto in = make_input(dt, op, r, count);
            std::vector<uint8_t> out(in.size() + 1, 0xEE);
            const bool in_place = (k++ % 2) == 1;
            if (in_place) std::memcpy(out.data(), in.data(), in.size());
            Status st = rk->comm->allreduce(in_place ? out.data() : in.data(), out.data(), count,
                                            dt, op, {.algo = algo});
            const std::string what = std::string(algo_name(algo)) + " " + dtype_name(dt) + " " +
                                     op_name(op) + " count " + std::to_string(count) +
                                     (in_place ? " in place" : "") + " rank " + std::to_string(r);
            ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
            wrong += check_result(dt, op, n, out.data(), count, what);
            ASSERT_EQ(out.back(), 0xEE) << what << ": wrote past the end";
            h = fnv(h, out.data(), in.size());
          }
        }
      }
    }
    digest[static_cast<size_t>(r)] = h;
  });
  EXPECT_EQ(wrong.load(), 0u);
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(digest[static_cast<size_t>(r)], digest[0])
        << "rank " << r << " bytes differ from rank 0";
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllreduceRanks, ::testing::Range(1, 9));

class OtherCollectives : public ::testing::TestWithParam<int> {};

TEST_P(OtherCollectives, ReduceScatterAllgatherBroadcastBarrier) {
  const int n = GetParam();
  std::atomic<size_t> wrong{0};
  run_ranks(n, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    for (DataType dt :
         {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64, DataType::kUInt8}) {
      const size_t es = dtype_size(dt);
      for (size_t block : sizes_for(dt, 1)) {
        const std::string what = std::string(dtype_name(dt)) + " block " + std::to_string(block) +
                                 " rank " + std::to_string(r);
        // reduce_scatter: rank r gets block r of the reduced vector of n * block.
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
          const size_t total = block * static_cast<size_t>(n);
          auto in = make_input(dt, op, r, total);
          std::vector<uint8_t> out(block * es);
          ASSERT_TRUE(rk->comm->reduce_scatter(in.data(), out.data(), block, dt, op).ok()) << what;
          for (size_t i = 0; i < block; ++i) {
            const size_t gi = static_cast<size_t>(r) * block + i;
            double ref = reference(dt, op, n, gi), g = to_double(dt, out.data() + i * es);
            if (!(std::fabs(g - ref) <= tolerance(dt, op, ref)) && ++wrong < 4)
              ADD_FAILURE() << "reduce_scatter " << op_name(op) << " " << what << " element " << i
                            << " = " << g << " want " << ref;
          }
        }
        // allgather: block r of the output is rank r's input.
        auto mine = make_input(dt, ReduceOp::kSum, r, block);
        std::vector<uint8_t> all(block * es * static_cast<size_t>(n));
        ASSERT_TRUE(rk->comm->allgather(mine.data(), all.data(), block, dt).ok()) << what;
        for (int p = 0; p < n; ++p) {
          auto theirs = make_input(dt, ReduceOp::kSum, p, block);
          if (std::memcmp(all.data() + static_cast<size_t>(p) * block * es, theirs.data(),
                          theirs.size()) != 0 &&
              ++wrong < 4)
            ADD_FAILURE() << "allgather " << what << ": block of rank " << p << " differs";
        }
        // broadcast from every root.
        for (int root = 0; root < n; ++root) {
          auto buf = make_input(dt, ReduceOp::kSum, r == root ? 1000 + root : r, block);
          ASSERT_TRUE(rk->comm->broadcast(buf.data(), block, dt, root).ok()) << what;
          if (buf != make_input(dt, ReduceOp::kSum, 1000 + root, block) && ++wrong < 4)
            ADD_FAILURE() << "broadcast root " << root << " " << what;
        }
        ASSERT_TRUE(rk->comm->barrier().ok()) << what;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Ranks, OtherCollectives, ::testing::Values(1, 2, 3, 4, 5, 7, 8));

TEST(Coll, FusedBucketAndAsyncOverlap) {
  const int n = 3;
  std::atomic<size_t> wrong{0};
  run_ranks(n, small_chunks(), [&](int r, std::unique_ptr<Rank>& rk) {
    const DataType dt = DataType::kFloat32;
    const std::vector<size_t> counts = {5, 0, 3000, 1};
    std::vector<std::vector<uint8_t>> in, out;
    std::vector<TensorRef> bucket;
    for (size_t c : counts) {
      in.push_back(make_input(dt, ReduceOp::kSum, r, c));
      out.emplace_back(c * 4);
    }
    for (size_t i = 0; i < in.size(); ++i)
      bucket.push_back({in[i].data(), out[i].data(), counts[i]});
    bucket[3].send = out[3].data();  // one in place
    std::memcpy(out[3].data(), in[3].data(), 4);
    auto hb = rk->comm->allreduce_async(bucket, dt, ReduceOp::kSum);
    ASSERT_TRUE(hb.ok()) << hb.status().to_string();
    // Three more in flight at once, waited on in reverse order.
    std::vector<std::vector<uint8_t>> a_in, a_out;
    std::vector<CollHandle> hs;
    for (size_t c : {size_t{17}, size_t{5000}, size_t{1}}) {
      a_in.push_back(make_input(dt, ReduceOp::kMax, r, c));
      a_out.emplace_back(c * 4);
    }
    for (size_t i = 0; i < a_in.size(); ++i) {
      auto h = rk->comm->allreduce_async(a_in[i].data(), a_out[i].data(), a_in[i].size() / 4, dt,
                                         ReduceOp::kMax);
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      hs.push_back(*h);
    }
    ASSERT_TRUE(rk->comm->progress().ok());
    for (size_t i = hs.size(); i-- > 0;) ASSERT_TRUE(rk->comm->wait(hs[i], Millis(20000)).ok());
    ASSERT_TRUE(rk->comm->wait(*hb, Millis(20000)).ok());
    EXPECT_FALSE(rk->comm->wait(*hb, Millis(1)).ok()) << "a handle is waited on once";
    for (size_t i = 0; i < counts.size(); ++i)
      wrong += check_result(dt, ReduceOp::kSum, n, out[i].data(), counts[i],
                            "bucket tensor " + std::to_string(i));
    for (size_t i = 0; i < a_out.size(); ++i)
      wrong += check_result(dt, ReduceOp::kMax, n, a_out[i].data(), a_out[i].size() / 4,
                            "async " + std::to_string(i));
  });
  EXPECT_EQ(wrong.load(), 0u);
}

// 16 MiB with the default (large) chunk: the production path.
TEST(Coll, Allreduce16MiB) {
  for (int n : {2, 3, 4}) {
    std::vector<uint64_t> digest(static_cast<size_t>(n));
    std::atomic<size_t> wrong{0};
    run_ranks(n, CommOptions{}, [&](int r, std::unique_ptr<Rank>& rk) {
      const size_t count = (16u << 20) / 4;
      for (DataType dt : {DataType::kFloat32, DataType::kBFloat16}) {
        const size_t c = dt == DataType::kFloat32 ? count : count * 2;
        auto in = make_input(dt, ReduceOp::kSum, r, c);
        std::vector<uint8_t> out(in.size());
        Status st = rk->comm->allreduce(in.data(), out.data(), c, dt, ReduceOp::kSum,
                                        {.algo = Algo::kRing});
        ASSERT_TRUE(st.ok()) << st.to_string();
        wrong += check_result(dt, ReduceOp::kSum, n, out.data(), c,
                              std::string("16 MiB ") + dtype_name(dt));
        digest[static_cast<size_t>(r)] =
            fnv(digest[static_cast<size_t>(r)], out.data(), out.size());
      }
    });
    EXPECT_EQ(wrong.load(), 0u) << n << " ranks";
    for (int r = 1; r < n; ++r)
      EXPECT_EQ(digest[static_cast<size_t>(r)], digest[0]) << n << " ranks, rank " << r;
  }
}

// The ring posts each step's chunks as one burst; a transport whose completion queue is
// nearly full takes only part of it (cq_depth 16 against up to 64 chunks in flight per
// direction), and the ring must resume at the first chunk it refused.
TEST(Coll, RingBurstsUnderTransportBackPressure) {
  const std::string spec = with_option(transport_spec(), "cq_depth=16");
  for (int n : {2, 3}) {
    std::atomic<size_t> wrong{0};
    run_ranks(
        n, small_chunks(),
        [&](int r, std::unique_ptr<Rank>& rk) {
          const size_t count = 64 * 1024 + 7;  // ~256 chunks of 1 KiB per call
          const auto dt = DataType::kFloat32;
          auto in = make_input(dt, ReduceOp::kSum, r, count);
          std::vector<uint8_t> out(in.size());
          for (int rep = 0; rep < 3; ++rep) {
            Status st = rk->comm->allreduce(in.data(), out.data(), count, dt, ReduceOp::kSum,
                                            {.algo = Algo::kRing});
            ASSERT_TRUE(st.ok()) << st.to_string();
            wrong += check_result(dt, ReduceOp::kSum, n, out.data(), count,
                                  "ring allreduce, cq_depth 16, rank " + std::to_string(r));
          }
          // Allgather: every block must land whole at its rank's place.
          const size_t block = 16 * 1024 + 3;
          std::vector<float> mine(block), all(block * static_cast<size_t>(n));
          for (size_t i = 0; i < block; ++i) mine[i] = static_cast<float>(r * 100000 + i);
          Status st = rk->comm->allgather(mine.data(), all.data(), block, dt);
          ASSERT_TRUE(st.ok()) << st.to_string();
          for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < block; ++i)
              if (all[static_cast<size_t>(q) * block + i] != static_cast<float>(q * 100000 + i))
                ++wrong;
        },
        {}, spec);
    EXPECT_EQ(wrong.load(), 0u) << n << " ranks";
  }
}

}  // namespace
}  // namespace gw::coll_test
