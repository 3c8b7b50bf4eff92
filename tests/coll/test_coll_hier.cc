// Hierarchical allreduce on loopback, hosts simulated by Group::create's host label: results
// element by element against the float64 reference on every rank, several sizes (odd counts,
// fewer elements than ranks, several chunks per part), in place and not, two rank layouts.
#include <atomic>

#include "coll_harness.h"

namespace gw::coll_test {
namespace {

struct Layout {
  const char* name;
  int hosts, per_host;
  bool blocked;  ///< ranks of a host are consecutive (else round-robin over hosts)
};

class HierLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(HierLayouts, MatchesReference) {
  const Layout lay = GetParam();
  const int n = lay.hosts * lay.per_host;
  std::atomic<size_t> wrong{0};
  auto host = [&](int r) {
    return "h" + std::to_string(lay.blocked ? r / lay.per_host : r % lay.hosts);
  };
  run_ranks(
      n, small_chunks(),
      [&](int r, std::unique_ptr<Rank>& rk) {
        const size_t ce = static_cast<size_t>(kChunkBytes) / 4;
        EXPECT_EQ(rk->comm->choose_algo(1 << 20), Algo::kHierarchical);
        int k = 0;
        struct Case {
          DataType dt;
          ReduceOp op;
        };
        for (Case c :
             {Case{DataType::kFloat32, ReduceOp::kSum}, Case{DataType::kInt32, ReduceOp::kMax},
              Case{DataType::kFloat16, ReduceOp::kAvg}, Case{DataType::kInt64, ReduceOp::kAvg}}) {
          for (size_t count :
               {size_t{1}, size_t{3}, size_t{1009}, 3 * ce * static_cast<size_t>(n) + 7}) {
            auto in = make_input(c.dt, c.op, r, count);
            std::vector<uint8_t> out(in.size() + 1, 0xEE);
            const bool in_place = (k++ % 2) == 1;
            if (in_place) std::memcpy(out.data(), in.data(), in.size());
            const std::string what = std::string(lay.name) + " " + dtype_name(c.dt) + " " +
                                     op_name(c.op) + " count " + std::to_string(count) +
                                     (in_place ? " in place" : "") + " rank " + std::to_string(r);
            Status st = rk->comm->allreduce(in_place ? out.data() : in.data(), out.data(), count,
                                            c.dt, c.op, {.algo = Algo::kHierarchical});
            ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
            wrong += check_result(c.dt, c.op, n, out.data(), count, what);
            ASSERT_EQ(out.back(), 0xEE) << what << ": wrote past the end";
          }
        }
        // Auto picks it above rd_max_bytes, and it mixes with the other algorithms in order.
        const size_t big = 40000;
        auto in = make_input(DataType::kFloat32, ReduceOp::kSum, r, big);
        std::vector<uint8_t> out(in.size());
        for (Algo a : {Algo::kAuto, Algo::kRing, Algo::kRecursiveDoubling, Algo::kAuto}) {
          ASSERT_TRUE(rk->comm
                          ->allreduce(in.data(), out.data(), big, DataType::kFloat32,
                                      ReduceOp::kSum, {.algo = a})
                          .ok());
          wrong += check_result(DataType::kFloat32, ReduceOp::kSum, n, out.data(), big,
                                std::string("after ") + algo_name(a));
        }
      },
      host);
  EXPECT_EQ(wrong.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Hier, HierLayouts,
                         ::testing::Values(Layout{"h2x2", 2, 2, true},
                                           Layout{"h3x2rr", 3, 2, false},
                                           Layout{"h2x3", 2, 3, true}),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(HierFlat, OneHostOrUnevenHostsUseTheRing) {
  // One rank on h0, two on h1: uneven, so auto stays with the ring and hier is refused.
  run_ranks(
      3, small_chunks(),
      [&](int r, std::unique_ptr<Rank>& rk) {
        EXPECT_EQ(rk->comm->choose_algo(1 << 20), Algo::kRing);
        if (r == 0) {
          float x = 1, y = 0;
          Status st = rk->comm->allreduce(&x, &y, 1, DataType::kFloat32, ReduceOp::kSum,
                                          {.algo = Algo::kHierarchical});
          EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.to_string();
          EXPECT_NE(st.to_string().find("GW_HOST"), std::string::npos) << st.to_string();
        }
      },
      [](int r) { return r == 0 ? "h0" : "h1"; });
}

}  // namespace
}  // namespace gw::coll_test
