// SSP never serves a staleness above s under a random straggler schedule; ASP keeps making
// progress while one worker is stalled (and BSP does not).
#include <atomic>
#include <chrono>
#include <random>

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

TEST(PsSsp, NeverServesStalenessAboveBound) {
  const int servers = 2, workers = 3, s = 2, iters = 24;
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
      for (size_t b = static_cast<size_t>(s) + 1; b < stats.staleness.size(); ++b)
        EXPECT_EQ(stats.staleness[b], 0u) << "staleness " << b << " served";
      EXPECT_GT(stats.staleness[s], 0u) << "the straggler phase serves staleness s";
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    const int me = w.worker_index();
    std::mt19937 rng(99 + static_cast<unsigned>(me));
    std::vector<std::vector<float>> grad(2), par(2);
    for (int k = 0; k < 2; ++k) {
      grad[k].resize(keys[k].count);
      par[k].resize(keys[k].count);
      one_hot(grad[k], workers, me);
    }
    for (int t = 0; t < iters; ++t) {
      if (me == 0 && t == 0) {
        // Straggler: no push until the others have reached the bound, so their pulls at
        // clock s see staleness exactly s and their next pull must wait.
        while (fast_at_bound.load() < workers - 1) std::this_thread::sleep_for(Millis(1));
      } else if (me == 0 || rng() % 3 == 0) {
        std::this_thread::sleep_for(Millis(rng() % 4));
      }
      PsHandle h[2];
      for (int k = 0; k < 2; ++k) {
        auto r = w.pull(keys[k].key, par[k]);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        h[k] = *r;
      }
      if (me != 0 && t == s + 1) {
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
        while (stale > prev && !worst_seen.compare_exchange_weak(prev, stale)) {}
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
  EXPECT_EQ(worst_seen.load(), s);
}

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
      // Stalled: alive but silent until the others are through.
      while (fast_done.load() < workers - 1) std::this_thread::sleep_for(Millis(2));
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
      while (!release.load()) std::this_thread::sleep_for(Millis(2));
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
