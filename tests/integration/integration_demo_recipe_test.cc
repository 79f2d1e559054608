// The demo runs the recipe the convergence test proves, to the bit: `tributary demo`
// (a coordinator and worker processes over TCP, cli/train_workload.cc) must end with the
// same parameters as the same recipe run in one process over the in-memory fabric
// (tests/support/recipe_training.h, what tests/compression/compressed_convergence_test.cc
// gates). The compressed collectives decode in rank order, so the transport cannot change
// a bit; any difference is a recipe that drifted (schedule, clipping, momentum placement,
// codec seed, sharding).
#include <gtest/gtest.h>

#include <regex>

#include "tests/integration/process.h"
#include "tests/support/recipe_training.h"

namespace tributary::integration {
namespace {

struct Case {
  std::string name;
  std::string codec;
  bool label_sorted = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DemoRecipe : public ::testing::TestWithParam<Case> {};

TEST_P(DemoRecipe, EndsWithTheParametersOfTheInProcessRecipe) {
  const Case& c = GetParam();
  constexpr int kEpochs = 4;  // the top-k warm-up (4 stages of 50 steps) fits
  constexpr std::uint64_t kSeed = 3;
  TempDir dir;
  std::vector<std::string> argv = {
      tributary_bin(),         "demo",   "--workers",           "4",       "--epochs",
      std::to_string(kEpochs), "--seed", std::to_string(kSeed), "--codec", c.codec,
      "--timeout-s",           "200",    "--no-faults"};
  if (c.label_sorted) argv.push_back("--label-sorted");
  Process p(dir, "demo", argv);
  const auto code = p.wait_until(deadline_after(std::chrono::seconds(240)));
  ASSERT_TRUE(code.has_value()) << "the demo did not exit\n" << p.dump();
  ASSERT_EQ(*code, 0) << p.dump();
  std::smatch m;
  const std::string out = p.out();
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex(R"(4 surviving workers hold bitwise-identical parameters \(sha256 ([0-9a-f]{64}), (\d+) steps\))")))
      << p.dump();

  auto plan = compression::collectives::CompressionPlan::parse(c.codec);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  training::Recipe recipe;
  recipe.epochs = kEpochs;
  const testing::RecipeRun run = testing::train_recipe(
      *plan, c.label_sorted ? training::Sharding::kLabelSorted : training::Sharding::kIid, kSeed,
      recipe);
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(m[1].str(), run.params_sha256) << "demo and in-process recipe disagree\n" << p.dump();
  // The accuracy the demo prints is the in-process run's.
  char accuracy[32];
  std::snprintf(accuracy, sizeof accuracy, "test accuracy %.2f%%", 100.0 * run.test_accuracy);
  EXPECT_NE(out.find(accuracy), std::string::npos) << accuracy << "\n" << p.dump();
}

INSTANTIATE_TEST_SUITE_P(Codecs, DemoRecipe,
                         ::testing::Values(Case{"sign", "sign"},
                                           Case{"topk_label_sorted", "topk", true},
                                           Case{"qint4_label_sorted", "qint4", true},
                                           Case{"bfloat16", "bfloat16"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tributary::integration
