#include "examples/training/recipe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tributary::training {
namespace {

TEST(Recipe, RateDecaysOnACosineOverTheEpochs) {
  const Recipe r;  // 0.1 over 30 epochs
  EXPECT_FLOAT_EQ(learning_rate_at(r, 0.0), 0.1f);
  EXPECT_NEAR(learning_rate_at(r, 15.0), 0.05f, 1e-7);
  EXPECT_NEAR(learning_rate_at(r, 7.5), 0.05f * (1.0f + std::sqrt(0.5f)), 1e-7);
  EXPECT_FLOAT_EQ(learning_rate_at(r, 30.0), 0.0f);
  EXPECT_FLOAT_EQ(learning_rate_at(r, 31.0), 0.0f) << "past the end it stays at 0";
  // Fractional epochs: the same curve whatever the steps per epoch are.
  EXPECT_LT(learning_rate_at(r, 10.5), learning_rate_at(r, 10.25));
}

TEST(Recipe, TheOptimizerLeavesMomentumToACodecThatCorrectsIt) {
  const Recipe r;
  EXPECT_FLOAT_EQ(make_optimizer(r, {}, 3).options().momentum, 0.9f);
  EXPECT_FLOAT_EQ(make_optimizer(r, {.applies_momentum = true}, 3).options().momentum, 0.0f);
  EXPECT_FLOAT_EQ(make_optimizer(r, {}, 3).options().learning_rate, 0.1f);
  EXPECT_EQ(make_optimizer(r, {}, 3).momentum().size(), 3u);
}

TEST(Recipe, SparseCodecsClipTheLocalGradientToClipNormOverRootWorld) {
  const Recipe r;                    // clip_norm 2: 1 per worker at 4 workers
  std::vector<float> g{3.0f, 4.0f};  // norm 5
  EXPECT_FLOAT_EQ(clip_local_gradient(r, {.sparse = true}, g, 4), 0.2f);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.8f);
  std::vector<float> small{0.3f, 0.4f};  // norm 0.5 <= 1: untouched
  EXPECT_FLOAT_EQ(clip_local_gradient(r, {.sparse = true}, small, 4), 1.0f);
  EXPECT_FLOAT_EQ(small[1], 0.4f);
  std::vector<float> dense{3.0f, 4.0f};
  EXPECT_FLOAT_EQ(clip_local_gradient(r, {.sparse = false}, dense, 4), 1.0f)
      << "dense codecs are not clipped";
  EXPECT_FLOAT_EQ(dense[0], 3.0f);
  std::vector<float> one{3.0f, 4.0f};
  clip_local_gradient(r, {.sparse = true}, one, 1);  // bound 2 alone
  EXPECT_NEAR(std::hypot(one[0], one[1]), 2.0f, 1e-6);
  Recipe off;
  off.clip_norm = 0.0f;
  std::vector<float> keep{3.0f, 4.0f};
  EXPECT_FLOAT_EQ(clip_local_gradient(off, {.sparse = true}, keep, 4), 1.0f);
}

TEST(Recipe, ApplyUpdateStepsAtTheRateOfThatPointOfTraining) {
  Recipe r;
  r.epochs = 2;
  Sgd sgd = make_optimizer(r, {.applies_momentum = true}, 1);
  std::vector<float> p{1.0f};
  const std::vector<float> g{1.0f};
  apply_update(r, sgd, p, g, 1.0);  // halfway: rate 0.05
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(sgd.options().learning_rate, 0.05f);
}

}  // namespace
}  // namespace tributary::training
