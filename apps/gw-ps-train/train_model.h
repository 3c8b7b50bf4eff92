/// @file train_model.h
/// The gw-ps-train job: a deterministic data set of Gaussian blobs (two classes) and a model,
/// logistic regression (hidden = 0) or a 2-layer MLP (tanh hidden layer, sigmoid output),
/// with its true gradient, loss and accuracy. Parameters are keyed tensors (one per layer).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gw_ps.h"

namespace gw::psapp {

struct Data {
  int dim = 0;
  std::vector<float> x;  ///< n x dim, row-major
  std::vector<float> y;  ///< 0 or 1
  size_t n() const { return y.size(); }
};

/// `n` samples in `dim` dimensions: class c ~ N(mu_c, I), mu_1 = -mu_0 with every third
/// coordinate 0.2 and the others 0.05 (overlapping classes: the loss keeps falling for a while).
Data make_blobs(size_t n, int dim, uint32_t seed);

class Model {
 public:
  Model(int dim, int hidden);
  /// One key per tensor: LR {w, b}; MLP {W1, b1, w2, b2}.
  const std::vector<KeySpec>& keys() const { return keys_; }
  /// Deterministic initial values (PsInit for the servers).
  PsInit init() const;
  /// Mean loss and the gradient over rows idx[0..m) of `d`; grads sized like params.
  double gradient(const std::vector<std::vector<float>>& params, const Data& d,
                  std::span<const size_t> rows, std::vector<std::vector<float>>& grads) const;
  /// Mean loss and accuracy over all of `d`.
  void evaluate(const std::vector<std::vector<float>>& params, const Data& d, double* loss,
                double* acc) const;

 private:
  float forward(const std::vector<std::vector<float>>& p, const float* x, float* h) const;
  int dim_, hidden_;
  std::vector<KeySpec> keys_;
};

}  // namespace gw::psapp
