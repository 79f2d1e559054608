// Every collective x every dtype across real processes on loopback: `tributary check
// --np N` starts a coordinator and N agent processes that run all 9 collectives x 8 dtypes
// x {sum, max, avg} x counts {0, 1, 7, 1000, 70001} against locally computed references
// and exit 0 only if every rank got every result right. The transport is a test axis:
// every world size runs over shared memory and over TCP, and the agents' own log lines
// say which one carried every pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

// 3 reducing collectives x 8 dtypes x 3 ops x 5 counts + 6 others x 8 dtypes x 5 counts.
constexpr int kCheckCases = 3 * 8 * 3 * 5 + 6 * 8 * 5;

void run_check(int np, const std::vector<std::string>& extra) {
  TempDir dir;
  std::vector<std::string> argv = {tributary_bin(),    "check",       "--np",
                                   std::to_string(np), "--timeout-s", "240"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Process check(dir, "check", argv);
  // `check` kills its own agents at --timeout-s; the margin covers its coordinator's exit.
  const auto code = check.wait_until(deadline_after(seconds(280)));
  ASSERT_TRUE(code.has_value()) << "tributary check did not finish\n" << check.dump();
  ASSERT_EQ(*code, 0) << check.dump();
  const std::string summary = "check: " + std::to_string(kCheckCases) +
                              " collective cases correct on " + std::to_string(np) + " ranks";
  EXPECT_NE(check.out().find(summary), std::string::npos) << check.dump();
  if (np > 1) {
    // Every agent logs its paths; a forced transport (or auto's shared memory on one
    // host) must be the one in use, and no other.
    const bool tcp = std::find(extra.begin(), extra.end(), "tcp") != extra.end();
    const std::string used = tcp ? ") over tcp" : ") over shm";
    const std::string other = tcp ? ") over shm" : ") over tcp";
    EXPECT_NE(check.err().find(used), std::string::npos) << check.dump();
    EXPECT_EQ(check.err().find(other), std::string::npos) << check.dump();
  }
}

class CheckWorldSize : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(CheckWorldSize, EveryCollectiveAndDtypeIsCorrect) {
  run_check(std::get<0>(GetParam()), {"--transport", std::get<1>(GetParam())});
}

INSTANTIATE_TEST_SUITE_P(Loopback, CheckWorldSize,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5, 8),
                                            ::testing::Values("shm", "tcp")),
                         [](const auto& info) {
                           return std::get<1>(info.param) + "_np" +
                                  std::to_string(std::get<0>(info.param));
                         });

// Forced all-reduce algorithms, with the default pipeline chunk and with a tiny one so the
// 70001-element cases run through many chunks.
struct AlgorithmCase {
  std::string algorithm;
  std::string chunk;  // empty: the default
};

class CheckAlgorithm : public ::testing::TestWithParam<AlgorithmCase> {};

TEST_P(CheckAlgorithm, EveryCollectiveAndDtypeIsCorrect) {
  std::vector<std::string> extra = {"--algorithm", GetParam().algorithm};
  if (!GetParam().chunk.empty()) extra.insert(extra.end(), {"--chunk-bytes", GetParam().chunk});
  run_check(4, extra);
}

std::vector<AlgorithmCase> algorithm_cases() {
  std::vector<AlgorithmCase> cases;
  for (const char* a : {"auto", "ring", "tree", "double_tree", "halving_doubling", "direct"}) {
    cases.push_back({a, ""});
    cases.push_back({a, "4K"});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Np4, CheckAlgorithm, ::testing::ValuesIn(algorithm_cases()),
                         [](const auto& info) {
                           return info.param.algorithm +
                                  (info.param.chunk.empty() ? "" : "_chunk" + info.param.chunk);
                         });

// An odd world size where halving-doubling has to fold the extra ranks in, with tiny chunks.
TEST(CheckOddWorld, HalvingDoublingAtFiveRanksWithTinyChunks) {
  run_check(5, {"--algorithm", "halving_doubling", "--chunk-bytes", "4K"});
}

// Hierarchical all-reduce among real agents split into zones (--zones gives each its
// --zone label): equal zones, unequal ones (2 + 3, 2 + 2 + 3), and the cost model's own
// choice with zones. The network is loopback; tests/integration/zones_netns.sh runs the
// same over shaped links between network namespaces.
TEST(CheckZones, HierarchicalOverEqualAndUnequalZones) {
  run_check(4, {"--zones", "2", "--algorithm", "hierarchical", "--chunk-bytes", "4K"});
  run_check(5, {"--zones", "2", "--algorithm", "hierarchical"});
  run_check(7, {"--zones", "3", "--algorithm", "hierarchical", "--transport", "tcp"});
  run_check(6, {"--zones", "2"});
}

}  // namespace
}  // namespace tributary::integration
