// The CLI's answers about codecs (refuse, warn, accept) for the configurations the
// convergence test measured; that test asserts the same verdicts against its numbers.
#include "compression/collectives/convergence_advice.h"

#include <gtest/gtest.h>

namespace tributary::compression::collectives {
namespace {

using Verdict = ConvergenceAdvice::Verdict;

ConvergenceAdvice advise(const char* spec) {
  auto plan = CompressionPlan::parse(spec);
  EXPECT_TRUE(plan.is_ok()) << spec << ": " << plan.status().to_string();
  return plan.is_ok() ? advise_training(*plan) : ConvergenceAdvice{};
}

TEST(ConvergenceAdvice, EveryDefaultCodecIsAccepted) {
  for (const char* spec : {"float32", "float16", "bfloat16", "qint8", "qint4", "sign", "topk",
                           "powersgd", "topk:density=0.001", "sign:bucket=4096", "qint4:zstd"}) {
    const ConvergenceAdvice a = advise(spec);
    EXPECT_EQ(a.verdict, Verdict::kNoKnownIssue) << spec << ": " << a.message;
    EXPECT_TRUE(a.message.empty()) << spec;
  }
}

TEST(ConvergenceAdvice, SignWithoutErrorFeedbackIsRefused) {
  const ConvergenceAdvice a = advise("sign:ef=0");
  EXPECT_EQ(a.verdict, Verdict::kDiverges);
  EXPECT_NE(a.message.find("diverges"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("docs/compression.md"), std::string::npos) << a.message;
}

TEST(ConvergenceAdvice, MeasuredLossesAreWarnedAboutWithTheFix) {
  const std::pair<const char*, const char*> cases[] = {
      {"sign:momentum=0", "keep momentum correction"},
      {"topk:ef=0", "drop ef=0"},
      {"topk:density=0.0005", "below density 0.001"},
      {"topk:density=0.001,momentum=0.9", "leave momentum=0"},
      {"topk:density=0.002,warmup=0", "keep the default warm-up"},
  };
  for (const auto& [spec, fix] : cases) {
    const ConvergenceAdvice a = advise(spec);
    EXPECT_EQ(a.verdict, Verdict::kLosesAccuracy) << spec;
    EXPECT_NE(a.message.find(fix), std::string::npos) << spec << ": " << a.message;
  }
  // At the default density, warm-up is not what decides the gate.
  EXPECT_EQ(advise("topk:warmup=0").verdict, Verdict::kNoKnownIssue);
}

}  // namespace
}  // namespace tributary::compression::collectives
