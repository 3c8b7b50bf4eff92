// Server-side updaters: sum (aggregation) and SGD with momentum.
#include <algorithm>
#include <string>

#include "gw_ps.h"

namespace gw {
namespace {

class SumUpdater final : public Updater {
 public:
  void apply(std::span<float> params, std::span<float>, std::span<const float> grad, int, int,
             bool round) override {
    if (round) {
      std::copy(grad.begin(), grad.end(), params.begin());
    } else {
      for (size_t i = 0; i < params.size(); ++i) params[i] += grad[i];
    }
  }
  std::string name() const override { return "sum"; }
};

class SgdUpdater final : public Updater {
 public:
  SgdUpdater(float lr, float momentum) : lr_(lr), mu_(momentum) {}
  size_t state_size() const override { return mu_ != 0.0f ? 1 : 0; }
  void apply(std::span<float> params, std::span<float> state, std::span<const float> grad, int,
             int workers, bool) override {
    const float scale = 1.0f / static_cast<float>(std::max(workers, 1));
    if (mu_ == 0.0f) {
      for (size_t i = 0; i < params.size(); ++i) params[i] -= lr_ * (grad[i] * scale);
      return;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      state[i] = mu_ * state[i] + grad[i] * scale;
      params[i] -= lr_ * state[i];
    }
  }
  std::string name() const override {
    return "sgd(lr=" + std::to_string(lr_) + ", momentum=" + std::to_string(mu_) + ")";
  }

 private:
  float lr_, mu_;
};

}  // namespace

std::unique_ptr<Updater> make_sum_updater() { return std::make_unique<SumUpdater>(); }

std::unique_ptr<Updater> make_sgd_updater(float lr, float momentum) {
  return std::make_unique<SgdUpdater>(lr, momentum);
}

}  // namespace gw
