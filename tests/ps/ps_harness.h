// Multi-rank harness for the ps suite: ranks are threads, each with its own transport (the
// spec in GW_TEST_PS_TRANSPORT, default "tcp:iface=lo") and a Group over one in-process store;
// plus a deterministic data set (Gaussian blobs) and a logistic-regression gradient used by
// the reference computations.
//
// Polling transports (DPDK) acknowledge and answer heartbeats only while polled, so a rank
// whose PS object is alive and that waits for anything other than a PS call (a flag set by
// another thread) waits with idle_until(), which keeps its transport polled.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gw_group.h"
#include "gw_ps.h"
#include "gw_store.h"
#include "gw_transport.h"

namespace gw::ps_test {

inline constexpr Nanos kTimeout = Millis(20000);

/// The transport every rank opens: GW_TEST_PS_TRANSPORT, default TCP on loopback.
inline std::string transport_spec() {
  const char* s = std::getenv("GW_TEST_PS_TRANSPORT");
  return s && *s ? s : "tcp:iface=lo";
}

/// Largest rank count a test may use: GW_TEST_PS_MAX_RANKS (default 8). Tests whose shape
/// needs more skip, saying so.
inline int max_ranks() {
  const char* s = std::getenv("GW_TEST_PS_MAX_RANKS");
  return s && *s ? std::atoi(s) : 8;
}

/// Skip the current test (with the reason) when `n` ranks exceed max_ranks().
#define GW_PS_NEED_RANKS(n)                                                                  \
  if ((n) > ::gw::ps_test::max_ranks())                                                      \
  GTEST_SKIP() << (n) << " ranks exceed GW_TEST_PS_MAX_RANKS=" << ::gw::ps_test::max_ranks() \
               << " for " << ::gw::ps_test::transport_spec()

/// Wait until pred() holds (or `timeout`), keeping g's transport polled (if g is not null):
/// completions stay queued for the PS calls that follow. Pass null once the rank's PS object
/// is gone. @return whether pred() held.
template <class Pred>
bool idle_until(Group* g, Pred pred, Nanos timeout = kTimeout) {
  Deadline dl(timeout);
  while (!pred()) {
    if (dl.expired()) return false;
    if (g) {
      DriveScope d(g->transport().gate());  // the PS objects' progress thread shares it
      (void)g->transport().cq().poll({});
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

/// Run fn(rank, group) on n threads; fn may reset the group (a rank that dies). A rank's
/// group lives until every rank has returned, so no rank sees a peer leave early; meanwhile it
/// is not polled: the PS objects on it are gone, and their posted receives must not be
/// completed into freed buffers (finish() and serve() end with a closing handshake, so no
/// peer needs it polled any more).
inline void run_ranks(int n, const std::function<void(int, std::unique_ptr<Group>&)>& fn) {
  auto store = make_in_process_store();
  const std::string spec = transport_spec();
  std::atomic<int> returned{0};
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      std::unique_ptr<Group> group;
      [&] {
        auto t = Transport::open(spec);
        ASSERT_TRUE(t.ok()) << spec << ": " << t.status().to_string();
        auto g = Group::create(store, std::move(t).value(), r, n, kTimeout, "ps");
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        group = std::move(g).value();
        fn(r, group);
      }();
      ++returned;
      if (!group || ::testing::Test::HasFailure()) return;
      idle_until(nullptr, [&] { return returned.load() == n; });
    });
  }
  for (auto& t : th) t.join();
}

inline PsOptions options(int servers, Consistency mode, int staleness = 0,
                         int64_t min_part_bytes = 64) {
  PsOptions o;
  o.servers = servers;
  o.mode = mode;
  o.staleness = staleness;
  o.min_part_bytes = min_part_bytes;
  o.timeout = kTimeout;
  return o;
}

/// Two Gaussian blobs in `dim` dimensions, labels 0/1, fixed seed.
struct Blobs {
  int dim = 0;
  std::vector<float> x;  // n x dim
  std::vector<float> y;
  size_t n() const { return y.size(); }
};

inline Blobs make_blobs(size_t n, int dim, uint32_t seed) {
  Blobs b;
  b.dim = dim;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  auto normal = [&] {  // Box-Muller: the same numbers on every standard library
    float u1 = std::max(u(rng), 1e-7f), u2 = u(rng);
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  };
  for (size_t i = 0; i < n; ++i) {
    const float label = static_cast<float>(i % 2);
    for (int d = 0; d < dim; ++d) {
      const float centre = (label > 0 ? 1.0f : -1.0f) * (d % 3 == 0 ? 1.0f : 0.25f);
      b.x.push_back(centre + normal());
    }
    b.y.push_back(label);
  }
  return b;
}

/// Mean logistic-loss gradient over rows [lo, hi): gw (dim) and gb (1). Returns the loss.
inline double logistic_grad(const Blobs& b, size_t lo, size_t hi, const std::vector<float>& w,
                            float bias, std::vector<float>& gw, float& gb) {
  gw.assign(static_cast<size_t>(b.dim), 0.0f);
  gb = 0.0f;
  double loss = 0;
  const float inv = 1.0f / static_cast<float>(hi - lo);
  for (size_t i = lo; i < hi; ++i) {
    const float* xi = &b.x[i * static_cast<size_t>(b.dim)];
    float z = bias;
    for (int d = 0; d < b.dim; ++d) z += w[static_cast<size_t>(d)] * xi[d];
    const float p = 1.0f / (1.0f + std::exp(-z));
    const float e = (p - b.y[i]) * inv;
    for (int d = 0; d < b.dim; ++d) gw[static_cast<size_t>(d)] += e * xi[d];
    gb += e;
    loss -= b.y[i] > 0 ? std::log(std::max(p, 1e-12f)) : std::log(std::max(1 - p, 1e-12f));
  }
  return loss / static_cast<double>(hi - lo);
}

/// Copy this server's parts of `key` into `out` (sized to the key by the caller; each server
/// thread fills its own elements).
inline void copy_out(const PsServer& s, uint64_t key, std::vector<float>& out) {
  const PsLayout& l = s.layout();
  const uint32_t ki = *l.find(key);
  for (uint32_t i = 0; i < l.num_parts(ki); ++i) {
    auto v = s.part_values(l.first_part(ki) + i);
    if (!v.ok()) continue;  // held by another server
    const PsPart& p = l.parts()[l.first_part(ki) + i];
    std::copy(v->begin(), v->end(), out.begin() + static_cast<long>(p.offset));
  }
}

}  // namespace gw::ps_test
