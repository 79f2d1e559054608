// The refit of the cost model's alpha and beta to measured all-reduces (algorithms/cost_refit.h):
// synthetic observations priced by a model with known constants (plus noise) give those
// constants back; windows that cannot tell alpha from beta give no fit.
#include "algorithms/cost_refit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "algorithms/cost_model.h"

namespace tributary::algorithms {
namespace {

const CostModel& base() { return CostModel::default_model(); }

// Observations of `truth`'s own choices at group size n, `repeats` times each size, each
// time slower than the prediction by up to `noise` (a loaded machine only adds time).
CostRefit observed(const CostModel& truth, int n, const std::vector<std::size_t>& sizes,
                   int repeats, double noise, std::uint32_t seed) {
  CostRefit refit;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> slower(0.0, noise);
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t bytes : sizes) {
      const AllReduceAlgorithm a = truth.choose(n, bytes);
      refit.observe({a, n, bytes, truth.predict(a, n, bytes) * (1.0 + slower(rng))});
    }
  }
  return refit;
}

const std::vector<std::size_t> kSizes = {1024, 16 * 1024, 256 * 1024, 4 << 20};

TEST(CostModelLinkTerms, AreTheModelsOwnLinearPiece) {
  const CostModel m = base().with_link(40e-6, 1 / 200e6);
  for (int n : {2, 3, 4, 8}) {
    for (std::size_t bytes : kSizes) {
      for (auto a :
           {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kTree, AllReduceAlgorithm::kDoubleTree,
            AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kDirect}) {
        const CostModel::LinkTerms t = m.link_terms(a, n, bytes);
        const double p = m.predict(a, n, bytes);
        EXPECT_NEAR(m.alpha() * t.per_alpha + m.beta() * t.per_beta + t.rest, p, 1e-9 * p);
        EXPECT_GT(t.per_alpha, 0);
        EXPECT_GT(t.per_beta, 0);
        // A little way along the piece the linear form still predicts (no kink that close).
        const CostModel moved = m.with_link(m.alpha() * 1.001, m.beta() * 1.001);
        EXPECT_NEAR(moved.alpha() * t.per_alpha + moved.beta() * t.per_beta + t.rest,
                    moved.predict(a, n, bytes), 2e-3 * p)
            << to_string(a) << " n=" << n << " bytes=" << bytes;
      }
    }
  }
}

TEST(CostRefit, RecoversKnownConstantsFromNoisyObservations) {
  struct Truth {
    double alpha, beta;
  };
  // A WAN, a slow LAN, the loopback defaults, a fast network.
  const Truth truths[] = {{1e-3, 8.0 / 1e9}, {50e-6, 1 / 100e6}, {5e-6, 1 / 5e9}, {2e-6, 1 / 20e9}};
  std::uint32_t seed = 1;
  for (const Truth& truth : truths) {
    for (int n : {2, 3, 4, 8}) {
      const CostModel model = base().with_link(truth.alpha, truth.beta);
      const CostRefit refit = observed(model, n, kSizes, 6, 0.2, seed++);
      const auto fit = refit.fit(base());
      ASSERT_TRUE(fit.has_value()) << "alpha=" << truth.alpha << " n=" << n;
      // Up to 20% slower, the fastest of 6 counts: a few % high, rarely more.
      EXPECT_NEAR(fit->alpha, truth.alpha, 0.15 * truth.alpha) << "n=" << n;
      EXPECT_NEAR(fit->beta, truth.beta, 0.15 * truth.beta) << "n=" << n;
      // What matters: the refitted model prices what was measured.
      const CostModel refitted = base().with_link(fit->alpha, fit->beta);
      for (std::size_t bytes : kSizes) {
        const AllReduceAlgorithm a = model.choose(n, bytes);
        EXPECT_NEAR(refitted.predict(a, n, bytes), model.predict(a, n, bytes),
                    0.15 * model.predict(a, n, bytes));
      }
    }
  }
}

TEST(CostRefit, SymmetricNoiseStaysClose) {
  const CostModel truth = base().with_link(300e-6, 1 / 50e6);
  CostRefit refit;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  for (int i = 0; i < 64; ++i) {
    const std::size_t bytes = std::size_t{512} << (i % 14);  // 512 B .. 4 MiB
    const AllReduceAlgorithm a = truth.choose(4, bytes);
    refit.observe({a, 4, bytes, truth.predict(a, 4, bytes) * (1.0 + noise(rng))});
  }
  const auto fit = refit.fit(base());
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->alpha, 300e-6, 0.15 * 300e-6);
  EXPECT_NEAR(fit->beta, 1 / 50e6, 0.15 / 50e6);
}

TEST(CostRefit, TooFewObservationsGiveNoFit) {
  const CostModel truth = base().with_link(50e-6, 1 / 100e6);
  CostRefit refit;
  EXPECT_FALSE(refit.fit(base()).has_value());
  for (std::size_t i = 0; i + 1 < CostRefit::kMinObservations; ++i) {
    const std::size_t bytes = kSizes[i % kSizes.size()];
    refit.observe(
        {truth.choose(4, bytes), 4, bytes, truth.predict(truth.choose(4, bytes), 4, bytes)});
  }
  EXPECT_FALSE(refit.fit(base()).has_value());
  refit.observe({truth.choose(4, 1024), 4, 1024, truth.predict(truth.choose(4, 1024), 4, 1024)});
  EXPECT_TRUE(refit.fit(base()).has_value());
  refit.clear();
  EXPECT_EQ(refit.size(), 0u);
  EXPECT_FALSE(refit.fit(base()).has_value());
}

TEST(CostRefit, OneSizeGivesNoFit) {
  const CostModel truth = base().with_link(50e-6, 1 / 100e6);
  const CostRefit refit = observed(truth, 4, {65536}, 40, 0.1, 3);
  EXPECT_EQ(refit.size(), 40u);
  EXPECT_FALSE(refit.fit(base()).has_value());
}

TEST(CostRefit, KindsWithTheSameMixOfMessagesAndBytesGiveNoFit) {
  // A direct all-reduce costs (n - 1) messages of s bytes on its critical path, and the
  // shared cores n (n - 1) of each: at any n the ratio of bytes to messages is s.
  const CostModel truth = base().with_link(50e-6, 1 / 100e6);
  CostRefit refit;
  for (int i = 0; i < 16; ++i) {
    const int n = 2 + i % 4;
    refit.observe({AllReduceAlgorithm::kDirect, n, 4096,
                   truth.predict(AllReduceAlgorithm::kDirect, n, 4096)});
  }
  EXPECT_FALSE(refit.fit(base()).has_value());
  // Sizes a factor 2 apart do tell them apart.
  for (int i = 0; i < 16; ++i) {
    refit.observe({AllReduceAlgorithm::kDirect, 4, 8192,
                   truth.predict(AllReduceAlgorithm::kDirect, 4, 8192)});
  }
  EXPECT_TRUE(refit.fit(base()).has_value());
}

TEST(CostRefit, IgnoresWhatCannotBeFitted) {
  CostRefit refit;
  refit.observe({AllReduceAlgorithm::kAuto, 4, 4096, 1e-3});
  refit.observe({AllReduceAlgorithm::kTree, 1, 4096, 1e-3});
  refit.observe({AllReduceAlgorithm::kTree, 4, 0, 1e-3});
  refit.observe({AllReduceAlgorithm::kTree, 4, 4096, 0});
  refit.observe({AllReduceAlgorithm::kTree, 4, 4096, -1});
  refit.observe({AllReduceAlgorithm::kTree, 4, 4096, std::numeric_limits<double>::quiet_NaN()});
  refit.observe({AllReduceAlgorithm::kTree, 4, 4096, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(refit.size(), 0u);
}

TEST(CostRefit, TheWindowFollowsTheLatestObservations) {
  const CostModel before = base().with_link(20e-6, 1 / 1e9);
  const CostModel after = base().with_link(500e-6, 1 / 20e6);
  CostRefit refit(32);
  for (int i = 0; i < 32; ++i) {
    const std::size_t bytes = kSizes[static_cast<std::size_t>(i) % kSizes.size()];
    const AllReduceAlgorithm a = before.choose(4, bytes);
    refit.observe({a, 4, bytes, before.predict(a, 4, bytes)});
  }
  ASSERT_TRUE(refit.fit(base()).has_value());
  EXPECT_NEAR(refit.fit(base())->alpha, 20e-6, 1e-6);
  for (int i = 0; i < 32; ++i) {
    const std::size_t bytes = kSizes[static_cast<std::size_t>(i) % kSizes.size()];
    const AllReduceAlgorithm a = after.choose(4, bytes);
    refit.observe({a, 4, bytes, after.predict(a, 4, bytes)});
  }
  EXPECT_EQ(refit.size(), 32u);
  const auto fit = refit.fit(base());
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->alpha, 500e-6, 25e-6);
  EXPECT_NEAR(fit->beta, 1 / 20e6, 0.05 / 20e6);
}

TEST(CostRefit, AnUnmeasurableTermKeepsTheBaseValue) {
  // Messages that cost 200 us each and bytes that cost nothing (an in-memory link behind
  // a delay): beta cannot be measured and stays the base model's; alpha is fitted alone.
  const CostModel truth = base().with_link(200e-6, 0);
  CostRefit refit;
  const std::vector<std::size_t> sizes = {1024, 4096, 16 * 1024, 64 * 1024};
  for (int i = 0; i < 16; ++i) {
    const std::size_t bytes = sizes[static_cast<std::size_t>(i) % sizes.size()];
    const AllReduceAlgorithm a = truth.choose(4, bytes);
    refit.observe({a, 4, bytes, truth.predict(a, 4, bytes)});
  }
  const auto fit = refit.fit(base());
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->beta, base().beta());
  // The base's bandwidth is charged too (a few % of these sizes' time).
  EXPECT_NEAR(fit->alpha, 200e-6, 0.1 * 200e-6);
}

TEST(CostRefit, ClampsToSaneRanges) {
  // A minute per all-reduce, whatever its size: a hung machine, not a link.
  CostRefit refit;
  for (int i = 0; i < 16; ++i) {
    const std::size_t bytes = kSizes[static_cast<std::size_t>(i) % kSizes.size()];
    refit.observe({AllReduceAlgorithm::kTree, 4, bytes, 60.0});
  }
  const auto fit = refit.fit(base());
  ASSERT_TRUE(fit.has_value());
  EXPECT_LE(fit->alpha, CostRefit::kMaxAlpha);
  EXPECT_GE(fit->alpha, CostRefit::kMinAlpha);
  EXPECT_LE(fit->beta, CostRefit::kMaxBeta);
  EXPECT_GE(fit->beta, CostRefit::kMinBeta);
  // Faster than the model's reduction alone: nothing to fit.
  CostRefit fast;
  for (int i = 0; i < 16; ++i) {
    const std::size_t bytes = i % 2 ? std::size_t{4096} : std::size_t{64} << 20;
    fast.observe({AllReduceAlgorithm::kRing, 4, bytes, 1e-9});
  }
  EXPECT_FALSE(fast.fit(base()).has_value());
}

}  // namespace
}  // namespace tributary::algorithms
