// BSP: SGD over k servers gives the parameters of single-process SGD on the same data; with
// the sum updater a BSP round is an allreduce (checked exactly, element by element).
#include <cmath>

#include "ps_harness.h"

namespace gw::ps_test {
namespace {

constexpr uint64_t kW = 11, kB = 42;  // weight and bias keys

struct Case {
  int servers, workers;
};

class PsBspSgd : public ::testing::TestWithParam<Case> {};

// Tolerance: the servers sum the workers' gradients in arrival order, the reference in worker
// order; float32 sums of 2-3 terms differ by a few ulp per step, amplified over 25 steps of
// momentum to well under 1e-5 of values of order 1.
constexpr float kTol = 2e-5f;

TEST_P(PsBspSgd, MatchesSingleProcessSgd) {
  const auto [servers, workers] = GetParam();
  GW_PS_NEED_RANKS(servers + workers);
  const int dim = 48, steps = 25;
  const size_t per = 40;
  const float lr = 0.5f, mu = 0.9f;
  const Blobs data = make_blobs(per * static_cast<size_t>(workers), dim, 1234);
  auto init = [](uint64_t key, uint64_t off, std::span<float> out) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = key == kB ? 0.1f : 0.01f * static_cast<float>((off + i) % 7) - 0.03f;
  };
  // Reference: one process, mean gradient of the shards (= full-batch gradient).
  std::vector<float> rw(dim), rv(dim, 0.0f);
  float rb = 0, rvb = 0;
  init(kW, 0, rw);
  init(kB, 0, {&rb, 1});
  double first_loss = 0, last_loss = 0;
  for (int t = 0; t < steps; ++t) {
    std::vector<float> sw(dim, 0.0f), gw;
    float sb = 0, gb = 0;
    double loss = 0;
    for (int w = 0; w < workers; ++w) {
      loss += logistic_grad(data, per * w, per * (w + 1), rw, rb, gw, gb);
      for (int d = 0; d < dim; ++d) sw[d] += gw[d];
      sb += gb;
    }
    if (t == 0) first_loss = loss / workers;
    last_loss = loss / workers;
    const float scale = 1.0f / static_cast<float>(workers);
    for (int d = 0; d < dim; ++d) {
      rv[d] = mu * rv[d] + sw[d] * scale;
      rw[d] -= lr * rv[d];
    }
    rvb = mu * rvb + sb * scale;
    rb -= lr * rvb;
  }
  ASSERT_LT(last_loss, 0.7 * first_loss) << "the reference does not learn; bad data set";

  std::vector<KeySpec> keys{{kW, static_cast<uint64_t>(dim)}, {kB, 1}};
  std::vector<float> got_w(dim, NAN), got_b(1, NAN);
  std::vector<std::vector<float>> pulled(static_cast<size_t>(workers));
  run_ranks(servers + workers, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(servers, Consistency::kBsp, 0, 16);  // 4-element pieces: w is cut
    if (rank < servers) {
      auto s = PsServer::create(*g, keys, o, make_sgd_updater(lr, mu), init);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      Status st = (*s)->serve(kTimeout);
      ASSERT_TRUE(st.ok()) << st.to_string();
      copy_out(**s, kW, got_w);
      copy_out(**s, kB, got_b);
      EXPECT_EQ((*s)->stats().max_staleness, 0);
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    const int idx = w.worker_index();
    std::vector<float> pw(dim), gw;
    float pb = 0, gb = 0;
    for (int t = 0; t < steps; ++t) {
      auto h1 = w.pull(kW, pw);
      auto h2 = w.pull(kB, {&pb, 1});
      ASSERT_TRUE(h1.ok() && h2.ok());
      ASSERT_TRUE(w.wait(*h1, kTimeout).ok());
      ASSERT_TRUE(w.wait(*h2, kTimeout).ok());
      logistic_grad(data, per * idx, per * (idx + 1), pw, pb, gw, gb);
      auto p1 = w.push(kW, gw);
      auto p2 = w.push(kB, {&gb, 1});
      ASSERT_TRUE(p1.ok() && p2.ok());
      ASSERT_TRUE(w.wait(*p1, kTimeout).ok());
      ASSERT_TRUE(w.wait(*p2, kTimeout).ok());
      EXPECT_EQ(w.clock(kW), t + 1);
    }
    auto h = w.pull(kW, pw);  // clock `steps`: after the last round
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(w.wait(*h, kTimeout).ok());
    pulled[static_cast<size_t>(idx)] = pw;
    Status st = w.finish(kTimeout);
    ASSERT_TRUE(st.ok()) << st.to_string();
  });
  for (int d = 0; d < dim; ++d) {
    EXPECT_NEAR(got_w[d], rw[d], kTol * std::max(1.0f, std::fabs(rw[d]))) << "w[" << d << "]";
    for (int w = 0; w < workers; ++w)
      EXPECT_EQ(pulled[static_cast<size_t>(w)][d], got_w[d]) << "worker " << w << " w[" << d << "]";
  }
  EXPECT_NEAR(got_b[0], rb, kTol * std::max(1.0f, std::fabs(rb)));
}

INSTANTIATE_TEST_SUITE_P(Servers, PsBspSgd,
                         ::testing::Values(Case{1, 2}, Case{2, 2}, Case{3, 1}, Case{1, 3},
                                           Case{3, 2}, Case{2, 3}),
                         [](const auto& tp) {
                           return std::to_string(tp.param.servers) + "servers_" +
                                  std::to_string(tp.param.workers) + "workers";
                         });

// Sum updater under BSP = allreduce: after round t every worker pulls the exact sum of the
// round's pushes. Integer-valued floats make the sums exact in any order.
TEST(PsBspSum, RoundIsAnAllreduce) {
  const int servers = 2, workers = max_ranks() >= 5 ? 3 : 2, rounds = 6;
  std::vector<KeySpec> keys{{1, 3}, {2, 5000}, {3, 1}, {4, 777}};
  auto value = [](int w, int t, uint64_t key, size_t i) {
    return static_cast<float>((w + 1) * 1000 + t * 10 + static_cast<int>((key * 31 + i) % 9));
  };
  run_ranks(servers + workers, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(servers, Consistency::kBsp, 0, 256);
    if (rank < servers) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      Status st = (*s)->serve(kTimeout);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ((*s)->stats().bad_requests, 0u);
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    std::vector<std::vector<float>> in(keys.size()), out(keys.size());
    std::vector<MemoryRegion> mrs;
    for (size_t k = 0; k < keys.size(); ++k) {
      in[k].resize(keys[k].count);
      out[k].resize(keys[k].count);
    }
    for (int t = 0; t < rounds; ++t) {
      std::vector<PsHandle> hs;
      for (size_t k = 0; k < keys.size(); ++k) {
        for (size_t i = 0; i < in[k].size(); ++i)
          in[k][i] = value(w.worker_index(), t, keys[k].key, i);
        auto mr = w.register_memory(in[k]);
        ASSERT_TRUE(mr.ok());
        auto h = w.push(keys[k].key, in[k], &*mr);
        ASSERT_TRUE(h.ok()) << h.status().to_string();
        ASSERT_TRUE(w.wait(*h, kTimeout).ok());
      }
      for (size_t k = 0; k < keys.size(); ++k) {
        auto h = w.pull(keys[k].key, out[k]);
        ASSERT_TRUE(h.ok());
        hs.push_back(*h);
      }
      for (auto h : hs) ASSERT_TRUE(w.wait(h, kTimeout).ok());
      for (size_t k = 0; k < keys.size(); ++k) {
        for (size_t i = 0; i < out[k].size(); ++i) {
          float want = 0;
          for (int v = 0; v < workers; ++v) want += value(v, t, keys[k].key, i);
          ASSERT_EQ(out[k][i], want) << "round " << t << " key " << keys[k].key << " [" << i << "]";
        }
      }
    }
    ASSERT_TRUE(w.finish(kTimeout).ok());
  });
}

}  // namespace
}  // namespace gw::ps_test

namespace gw::ps_test {
namespace {

// Background progress: a worker that makes no call for 10 s between its push and its pull
// (a trainer computing) is not taken for dead while the server and the other worker wait on
// it (dpdk: nobody else acks for it). The round's sum is checked element by element.
TEST(PsLiveness, AWorkerThatComputesTenSecondsIsNotTakenForDead) {
  const int servers = 1, workers = 2;
  const auto gap = Millis(10'000);
  std::vector<KeySpec> keys{{1, 1000}};
  auto value = [](int w, size_t i) { return static_cast<float>((w + 1) * 100 + i % 7); };
  run_ranks(servers + workers, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(servers, Consistency::kBsp, 0, 256);
    o.timeout = Millis(60'000);
    if (rank < servers) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      Status st = (*s)->serve(Millis(60'000));
      ASSERT_TRUE(st.ok()) << st.to_string();
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    std::vector<float> in(1000), out(1000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(w.worker_index(), i);
    auto h = w.push(1, in);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    if (w.worker_index() == 1) std::this_thread::sleep_for(gap);  // computes, no call
    ASSERT_TRUE(w.wait(*h, Millis(60'000)).ok());
    auto p = w.pull(1, out);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Status st = w.wait(*p, Millis(60'000));
    ASSERT_TRUE(st.ok()) << "worker " << w.worker_index() << ": " << st.to_string();
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], value(0, i) + value(1, i)) << "element " << i;
    ASSERT_TRUE(w.finish(Millis(60'000)).ok());
  });
}

}  // namespace
}  // namespace gw::ps_test
