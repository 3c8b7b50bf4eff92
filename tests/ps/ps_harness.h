// Multi-rank harness for the ps suite: ranks are threads, each with its own TCP transport on
// loopback and a Group over one in-process store; plus a deterministic data set (Gaussian
// blobs) and a logistic-regression gradient used by the reference computations.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
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

/// Run fn(rank, group) on n threads; fn may reset the group (a rank that dies).
inline void run_ranks(int n, const std::function<void(int, std::unique_ptr<Group>&)>& fn) {
  auto store = make_in_process_store();
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      auto t = Transport::open("tcp:iface=lo");
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      auto g = Group::create(store, std::move(t).value(), r, n, kTimeout, "ps");
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      std::unique_ptr<Group> group = std::move(g).value();
      fn(r, group);
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
