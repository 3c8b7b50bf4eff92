// Gaussian blobs and the logistic-regression / MLP model of gw-ps-train.
#include "train_model.h"

#include <cmath>
#include <random>

namespace gw::psapp {

Data make_blobs(size_t n, int dim, uint32_t seed) {
  Data d;
  d.dim = dim;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  auto normal = [&] {  // Box-Muller: the same numbers with every standard library
    float u1 = std::max(u(rng), 1e-7f), u2 = u(rng);
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  };
  d.x.reserve(n * static_cast<size_t>(dim));
  for (size_t i = 0; i < n; ++i) {
    const float label = static_cast<float>(rng() % 2);
    for (int j = 0; j < dim; ++j) {
      const float mu = (j % 3 == 0 ? 0.2f : 0.05f) * (label > 0 ? 1.0f : -1.0f);
      d.x.push_back(mu + normal());
    }
    d.y.push_back(label);
  }
  return d;
}

Model::Model(int dim, int hidden) : dim_(dim), hidden_(hidden) {
  const auto d = static_cast<uint64_t>(dim), h = static_cast<uint64_t>(hidden);
  if (hidden == 0) {
    keys_ = {{0, d}, {1, 1}};
  } else {
    keys_ = {{0, h * d}, {1, h}, {2, h}, {3, 1}};
  }
}

PsInit Model::init() const {
  const int dim = dim_, hidden = hidden_;
  return [dim, hidden](uint64_t key, uint64_t offset, std::span<float> out) {
    for (size_t i = 0; i < out.size(); ++i) {
      if (hidden == 0 || key == 1 || key == 3) {
        out[i] = 0.0f;
        continue;
      }
      // Uniform(-a, a) from a hash of the element: the same on every server layout.
      uint64_t z = (key + 1) * 0x9E3779B97F4A7C15ull + (offset + i) * 0xBF58476D1CE4E5B9ull;
      z ^= z >> 31;
      z *= 0x94D049BB133111EBull;
      z ^= z >> 29;
      const float r = static_cast<float>(z >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
      const float a = 1.0f / std::sqrt(static_cast<float>(key == 0 ? dim : hidden));
      out[i] = r * a;
    }
  };
}

float Model::forward(const std::vector<std::vector<float>>& p, const float* x, float* h) const {
  float z;
  if (hidden_ == 0) {
    z = p[1][0];
    for (int j = 0; j < dim_; ++j) z += p[0][static_cast<size_t>(j)] * x[j];
  } else {
    z = p[3][0];
    for (int k = 0; k < hidden_; ++k) {
      float a = p[1][static_cast<size_t>(k)];
      const float* wk = &p[0][static_cast<size_t>(k * dim_)];
      for (int j = 0; j < dim_; ++j) a += wk[j] * x[j];
      h[k] = std::tanh(a);
      z += p[2][static_cast<size_t>(k)] * h[k];
    }
  }
  return 1.0f / (1.0f + std::exp(-z));
}

namespace {
double bce(float p, float y) {
  const double q = std::clamp(static_cast<double>(p), 1e-7, 1.0 - 1e-7);
  return y > 0 ? -std::log(q) : -std::log(1.0 - q);
}
}  // namespace

double Model::gradient(const std::vector<std::vector<float>>& params, const Data& d,
                       std::span<const size_t> rows, std::vector<std::vector<float>>& grads) const {
  grads.resize(keys_.size());
  for (size_t k = 0; k < keys_.size(); ++k) grads[k].assign(keys_[k].count, 0.0f);
  std::vector<float> h(static_cast<size_t>(hidden_));
  const float inv = 1.0f / static_cast<float>(rows.size());
  double loss = 0;
  for (size_t r : rows) {
    const float* x = &d.x[r * static_cast<size_t>(dim_)];
    const float p = forward(params, x, h.data());
    loss += bce(p, d.y[r]);
    const float e = (p - d.y[r]) * inv;  // dLoss/dz
    if (hidden_ == 0) {
      for (int j = 0; j < dim_; ++j) grads[0][static_cast<size_t>(j)] += e * x[j];
      grads[1][0] += e;
      continue;
    }
    grads[3][0] += e;
    for (int k = 0; k < hidden_; ++k) {
      const auto ks = static_cast<size_t>(k);
      grads[2][ks] += e * h[ks];
      const float da = e * params[2][ks] * (1.0f - h[ks] * h[ks]);
      grads[1][ks] += da;
      float* gk = &grads[0][ks * static_cast<size_t>(dim_)];
      for (int j = 0; j < dim_; ++j) gk[j] += da * x[j];
    }
  }
  return loss / static_cast<double>(rows.size());
}

void Model::evaluate(const std::vector<std::vector<float>>& params, const Data& d, double* loss,
                     double* acc) const {
  std::vector<float> h(static_cast<size_t>(hidden_));
  double l = 0;
  size_t right = 0;
  for (size_t r = 0; r < d.n(); ++r) {
    const float p = forward(params, &d.x[r * static_cast<size_t>(dim_)], h.data());
    l += bce(p, d.y[r]);
    right += (p >= 0.5f) == (d.y[r] > 0);
  }
  *loss = l / static_cast<double>(d.n());
  *acc = static_cast<double>(right) / static_cast<double>(d.n());
}

}  // namespace gw::psapp
