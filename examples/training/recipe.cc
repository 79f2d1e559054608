#include "examples/training/recipe.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tributary::training {

float learning_rate_at(const Recipe& recipe, double epochs_done) {
  if (recipe.epochs <= 0) return recipe.learning_rate;
  const double progress = std::min(1.0, std::max(0.0, epochs_done / recipe.epochs));
  return static_cast<float>(recipe.learning_rate * 0.5 *
                            (1.0 + std::cos(std::numbers::pi * progress)));
}

Sgd make_optimizer(const Recipe& recipe, const GradientCodec& codec, std::size_t num_params) {
  return Sgd(num_params, SgdOptions{.learning_rate = recipe.learning_rate,
                                    .momentum = codec.applies_momentum ? 0.0f : recipe.momentum});
}

float clip_local_gradient(const Recipe& recipe, const GradientCodec& codec, std::span<float> grad,
                          int world_size) {
  if (!codec.sparse || !(recipe.clip_norm > 0.0f) || world_size < 1) return 1.0f;
  double squares = 0;
  for (float g : grad) squares += static_cast<double>(g) * g;
  const double bound = recipe.clip_norm / std::sqrt(static_cast<double>(world_size));
  const double norm = std::sqrt(squares);
  if (!(norm > bound)) return 1.0f;
  const auto factor = static_cast<float>(bound / norm);
  for (float& g : grad) g *= factor;
  return factor;
}

void apply_update(const Recipe& recipe, Sgd& sgd, std::span<float> params,
                  std::span<const float> averaged_grad, double epochs_done) {
  sgd.set_learning_rate(learning_rate_at(recipe, epochs_done));
  sgd.step(params, averaged_grad);
}

}  // namespace tributary::training
