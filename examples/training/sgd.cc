#include "examples/training/sgd.h"

#include "core/check.h"

namespace tributary::training {

Sgd::Sgd(std::size_t num_params, SgdOptions options)
    : options_(options), velocity_(num_params, 0.0f) {}

void Sgd::step(std::span<float> params, std::span<const float> grads) {
  TRIB_CHECK(params.size() == velocity_.size() && grads.size() == velocity_.size())
      << "params " << params.size() << ", grads " << grads.size() << ", optimiser "
      << velocity_.size();
  const float lr = options_.learning_rate;
  const float mu = options_.momentum;
  const float wd = options_.weight_decay;
  for (std::size_t i = 0; i < params.size(); ++i) {
    velocity_[i] = mu * velocity_[i] + (grads[i] + wd * params[i]);
    params[i] -= lr * velocity_[i];
  }
}

}  // namespace tributary::training
