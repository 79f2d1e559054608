#include "examples/training/sgd.h"

#include <gtest/gtest.h>

#include <vector>

namespace tributary::training {
namespace {

TEST(Sgd, MomentumMatchesTheFormulaByHand) {
  Sgd sgd(2, {.learning_rate = 0.1f, .momentum = 0.9f, .weight_decay = 0.0f});
  std::vector<float> p{1.0f, -2.0f};
  const std::vector<float> g{0.5f, 1.0f};
  sgd.step(p, g);  // v = g; p -= 0.1 v
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -2.1f);
  sgd.step(p, g);  // v = 0.9 g + g = 1.9 g
  EXPECT_FLOAT_EQ(sgd.momentum()[0], 0.95f);
  EXPECT_FLOAT_EQ(p[0], 0.95f - 0.095f);
  EXPECT_FLOAT_EQ(p[1], -2.1f - 0.19f);
}

TEST(Sgd, WeightDecayPullsTowardsZero) {
  Sgd sgd(1, {.learning_rate = 0.5f, .momentum = 0.0f, .weight_decay = 0.1f});
  std::vector<float> p{2.0f};
  const std::vector<float> g{0.0f};
  sgd.step(p, g);  // p -= 0.5 * (0 + 0.1 * 2)
  EXPECT_FLOAT_EQ(p[0], 1.9f);
}

TEST(Sgd, ReceivedMomentumReproducesTheTrajectory) {
  // A joiner that copies params and momentum from a running worker takes exactly the
  // steps that worker takes; one that copies params only does not.
  const SgdOptions opts{.learning_rate = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};
  Sgd running(3, opts);
  std::vector<float> p{0.3f, -0.7f, 1.1f};
  for (int i = 0; i < 5; ++i) running.step(p, std::vector<float>{0.1f * i, -0.2f, 0.05f});

  Sgd joiner(3, opts), naive(3, opts);
  std::copy(running.momentum().begin(), running.momentum().end(), joiner.momentum().begin());
  std::vector<float> pj = p, pn = p;
  const std::vector<float> g{0.4f, 0.1f, -0.3f};
  running.step(p, g);
  joiner.step(pj, g);
  naive.step(pn, g);
  EXPECT_EQ(p, pj);
  EXPECT_NE(p, pn);
}

}  // namespace
}  // namespace tributary::training
