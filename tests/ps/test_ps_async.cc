// SSP never serves a staleness above s under a random straggler schedule; ASP keeps making
// progress while one worker is stalled (and BSP does not).
#include <atomic>
#include <chrono>
#include <random>
#include <tuple>

#include "ps_harness.h"

namespace gw::ps_test {
namespace {

// Key 1 has one element per worker: worker w pushes 1 at index w, so a pulled value is the
// number of that worker's pushes the server has applied. Key 2 is large (cut across servers)
// with the same pattern repeated.
std::vector<KeySpec> counting_keys(int workers) {
  return {{1, static_cast<uint64_t>(workers)}, {2, static_cast<uint64_t>(workers) * 3000}};
}

void one_hot(std::vector<float>& v, int workers, int w) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i % workers) == w ? 1.0f : 0.0f;
}

// Smallest per-worker count in a pulled counting key (parts on different servers may differ);
// -1 if a value is not a count.
int64_t min_count(const std::vector<float>& v) {
  int64_t m = INT64_MAX;
  for (float x : v) {
    if (x < 0 || x != std::floor(x)) return -1;
    m = std::min<int64_t>(m, static_cast<int64_t>(x));
  }
  return m;
}

// One SSP job: every worker pulls both counting keys, checks the staleness it was served
// from the values themselves, and pushes; `iters` clocks. At each clock one worker, drawn
// from `seed`, is the straggler and sleeps 2-7 ms, the others 0-1 ms. With `forced`, worker 0
// also holds its first push back until the others have met the bound (so staleness s is
// served and a pull at s+1 is seen to wait). Checks the servers' record of what they served.
void ssp_run(int s, uint32_t seed, bool forced) {
  const int servers = 2, workers = max_ranks() >= 5 ? 3 : 2, iters = 24;
  auto keys = counting_keys(workers);
  std::atomic<int> fast_at_bound{0};
  std::atomic<int64_t> worst_seen{0};
  run_ranks(servers + workers, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(servers, Consistency::kSsp, s, 1024);
    if (rank < servers) {
      auto sv = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(sv.ok()) << sv.status().to_string();
      Status st = (*sv)->serve(kTimeout);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const auto& stats = (*sv)->stats();
      EXPECT_LE(stats.max_staleness, s);
      uint64_t served = 0;
      for (size_t b = 0; b < stats.staleness.size(); ++b) {
        served += stats.staleness[b];
        if (b > static_cast<size_t>(s)) {
          EXPECT_EQ(stats.staleness[b], 0u) << "staleness " << b;
        }
      }
      EXPECT_EQ(served, stats.pulls) << "every pull's staleness is recorded";
      if (forced) {
        EXPECT_GT(stats.staleness[s], 0u) << "the straggler phase serves staleness s";
      }
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    const int me = w.worker_index();
    std::mt19937 schedule(seed), jitter(seed * 31 + static_cast<unsigned>(me));
    std::vector<std::vector<float>> grad(2), par(2);
    for (int k = 0; k < 2; ++k) {
      grad[k].resize(keys[k].count);
      par[k].resize(keys[k].count);
      one_hot(grad[k], workers, me);
    }
    for (int t = 0; t < iters; ++t) {
      const int straggler = static_cast<int>(schedule() % static_cast<unsigned>(workers));
      if (forced && me == 0 && t == 0) {
        // No push until the others have reached the bound, so their pulls at clock s see
        // staleness exactly s and their next pull must wait.
        ASSERT_TRUE(idle_until(g.get(), [&] { return fast_at_bound.load() == workers - 1; }));
      } else {
        const unsigned ms = me == straggler ? 2 + jitter() % 6 : jitter() % 2;
        idle_until(
            g.get(), [] { return false; }, Millis(ms));
      }
      PsHandle h[2];
      for (int k = 0; k < 2; ++k) {
        auto r = w.pull(keys[k].key, par[k]);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        h[k] = *r;
      }
      if (forced && me != 0 && t == s + 1) {
        // Worker 0 has pushed nothing: a pull at clock s+1 must not be served.
        Status st = w.wait(h[0], Millis(300));
        EXPECT_EQ(st.code(), Code::kTimeout) << st.to_string();
        ++fast_at_bound;
      }
      for (int k = 0; k < 2; ++k) {
        Status st = w.wait(h[k], kTimeout);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const int64_t slowest = min_count(par[k]);
        ASSERT_GE(slowest, 0) << "pulled values are not push counts";
        const int64_t stale = t - slowest;
        EXPECT_LE(stale, s) << "worker " << me << " clock " << t << " key " << keys[k].key;
        int64_t prev = worst_seen.load();
        while (stale > prev && !worst_seen.compare_exchange_weak(prev, stale)) {
        }
        if (k == 0) {  // small messages keep their order: a worker reads its own pushes
          EXPECT_GE(par[k][static_cast<size_t>(me)], static_cast<float>(t));
        }
      }
      for (int k = 0; k < 2; ++k) {
        auto r = w.push(keys[k].key, grad[k]);
        ASSERT_TRUE(r.ok());
        ASSERT_TRUE(w.wait(*r, kTimeout).ok());
      }
    }
    Status st = w.finish(kTimeout);
    ASSERT_TRUE(st.ok()) << st.to_string();
  });
  if (forced) {
    EXPECT_EQ(worst_seen.load(), s);
  }
  EXPECT_LE(worst_seen.load(), s);
}

TEST(PsSsp, NeverServesStalenessAboveBound) { ssp_run(2, 99, true); }

class PsSspRandom : public ::testing::TestWithParam<std::tuple<int, uint32_t>> {};

TEST_P(PsSspRandom, BoundHoldsUnderRandomStragglers) {
  ssp_run(std::get<0>(GetParam()), std::get<1>(GetParam()), false);
}

INSTANTIATE_TEST_SUITE_P(Schedules, PsSspRandom,
                         ::testing::Combine(::testing::Values(0, 1, 3),
                                            ::testing::Values(7u, 2024u)),
                         [](const auto& tp) {
                           return "s" + std::to_string(std::get<0>(tp.param)) + "_seed" +
                                  std::to_string(std::get<1>(tp.param));
                         });

TEST(PsAsp, ProgressesWithAStalledWorker) {
  const int servers = 1, workers = 3, iters = 30;
  auto keys = counting_keys(workers);
  std::atomic<int> fast_done{0};
  run_ranks(servers + workers, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(servers, Consistency::kAsp);
    if (rank < servers) {
      auto sv = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(sv.ok()) << sv.status().to_string();
      Status st = (*sv)->serve(kTimeout);
      ASSERT_TRUE(st.ok()) << st.to_string();
      // The fast workers pulled at clock iters-1 while the stalled one had applied 1 push.
      EXPECT_GE((*sv)->stats().max_staleness, iters - 2);
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    const int me = w.worker_index();
    std::vector<float> grad(keys[0].count), par(keys[0].count);
    one_hot(grad, workers, me);
    const int my_iters = me == 2 ? 1 : iters;
    for (int t = 0; t < my_iters; ++t) {
      auto p = w.push(1, grad);
      ASSERT_TRUE(p.ok());
      ASSERT_TRUE(w.wait(*p, kTimeout).ok());
      auto h = w.pull(1, par);
      ASSERT_TRUE(h.ok());
      Status st = w.wait(*h, kTimeout);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_GE(par[static_cast<size_t>(me)], static_cast<float>(t + 1));
    }
    if (me == 2) {
      // Stalled: no pushes or pulls until the others are through, only progress() (without
      // it a polling transport's peers would take this worker for dead). On dpdk the stall
      // outlasts dpdk.peer_timeout_ms (1500 ms by default), which progress() must bridge.
      const Deadline min_stall(transport_spec().starts_with("dpdk") ? Millis(2000) : Millis(0));
      const Deadline dl(kTimeout);
      while ((fast_done.load() < workers - 1 || !min_stall.expired()) && !dl.expired()) {
        ASSERT_TRUE(w.progress().ok()) << w.status().to_string();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    } else {
      EXPECT_EQ(par[static_cast<size_t>(me)], static_cast<float>(iters));
      EXPECT_LE(par[2], 1.0f);
      ++fast_done;
    }
    Status st = w.finish(kTimeout);
    ASSERT_TRUE(st.ok()) << st.to_string();
  });
}

TEST(PsBsp, BlocksOnAStalledWorker) {
  auto keys = counting_keys(2);
  std::atomic<bool> release{false};
  run_ranks(3, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(1, Consistency::kBsp);
    if (rank == 0) {
      auto sv = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(sv.ok());
      ASSERT_TRUE((*sv)->serve(kTimeout).ok());
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok());
    PsWorker& w = **wk;
    std::vector<float> grad(2, 1.0f), par(2);
    if (w.worker_index() == 1) {
      ASSERT_TRUE(idle_until(g.get(), [&] { return release.load(); }));
    }
    auto p = w.push(1, grad);
    ASSERT_TRUE(p.ok() && w.wait(*p, kTimeout).ok());
    auto h = w.pull(1, par);
    ASSERT_TRUE(h.ok());
    if (w.worker_index() == 0) {
      Status st = w.wait(*h, Millis(300));
      EXPECT_EQ(st.code(), Code::kTimeout) << "BSP served round 1 before worker 1 pushed";
      release = true;
    }
    ASSERT_TRUE(w.wait(*h, kTimeout).ok());
    EXPECT_EQ(par[0], 2.0f);
    ASSERT_TRUE(w.finish(kTimeout).ok());
  });
}

}  // namespace
}  // namespace gw::ps_test
