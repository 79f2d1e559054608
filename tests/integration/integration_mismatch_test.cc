// Ranks that disagree about a collective: N agent processes all-reduce 1000 float32, the
// last rank with 1001 elements (count) or int32 elements of the same byte size (dtype).
// Every rank must exit with the workload's "failed as expected" status 3 and a clear
// error (the mismatch itself, or the failure of a peer that detected it) well within the
// collective deadline: never 0 (a wrong sum), never a hang. Swept over every all-reduce
// algorithm at N = 4, since each one pairs ranks differently, and over world sizes with
// the default choice.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

struct MismatchCase {
  std::string kind;       // --mismatch
  std::string algorithm;  // --algorithm
  int ranks = 4;
};

void PrintTo(const MismatchCase& c, std::ostream* os) {
  *os << c.kind << " " << c.algorithm << " np" << c.ranks;
}

class Mismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(Mismatch, EveryRankFailsWithAClearErrorAndNoneHangs) {
  TempDir dir;
  const std::string secret = "mismatch-secret";
  const int np = GetParam().ranks;
  CoordinatorProcess coordinator(dir, "coordinator", secret, np);
  ASSERT_FALSE(coordinator.wait_ready(deadline_after(seconds(30))).empty())
      << coordinator.process->dump();
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < np; ++i) {
    agents.push_back(std::make_unique<Process>(
        dir, "agent" + std::to_string(i),
        agent_argv(coordinator.endpoint(), secret,
                   {"--workload", "mismatch", "--mismatch", GetParam().kind, "--algorithm",
                    GetParam().algorithm, "--timeout-ms", "60000"})));
  }
  const auto started = std::chrono::steady_clock::now();
  auto dumps = [&] {
    std::string s = coordinator.process->dump();
    for (const auto& a : agents) s += a->dump();
    return s;
  };
  // The collective deadline is 60 s. The ranks that see the mismatch abort their links,
  // so the others hear of it at once: nobody should wait out that deadline (30 s is far
  // more than joining and failing take on a loaded machine), and a hang shows as no exit
  // by 120 s.
  const auto deadline = deadline_after(seconds(120));
  // "rank R: <status>" on stdout (cli/main.cc); the status names what went wrong.
  const std::regex error_line(
      R"(rank (\d+): (mismatch|peer lost|aborted|bad frame|timed out)[^\n]*)");
  int saw_mismatch = 0;
  std::set<int> ranks;
  for (auto& a : agents) {
    const auto code = a->wait_until(deadline);
    ASSERT_TRUE(code.has_value()) << a->name() << " hangs\n" << dumps();
    EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(30))
        << a->name() << " waited for its collective deadline instead of hearing of the failure\n"
        << dumps();
    EXPECT_EQ(*code, 3) << a->name() << (*code == 0 ? " completed a mismatched all-reduce" : "")
                        << "\n"
                        << dumps();
    std::smatch m;
    const std::string out = a->out();
    ASSERT_TRUE(std::regex_search(out, m, error_line)) << a->name() << "\n" << dumps();
    ranks.insert(std::stoi(m[1]));
    saw_mismatch += m[2] == "mismatch" ? 1 : 0;
  }
  EXPECT_EQ(ranks.size(), static_cast<std::size_t>(np)) << dumps();
  // At least the ranks next to the odd one out name the real cause.
  EXPECT_GE(saw_mismatch, 1) << dumps();
}

std::vector<MismatchCase> cases() {
  std::vector<MismatchCase> out;
  for (const char* kind : {"count", "dtype"}) {
    for (const char* a : {"auto", "ring", "tree", "double_tree", "halving_doubling", "direct"}) {
      out.push_back({kind, a});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Np4, Mismatch, ::testing::ValuesIn(cases()), [](const auto& info) {
  return info.param.kind + "_" + info.param.algorithm;
});

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, Mismatch,
    ::testing::Values(MismatchCase{"count", "auto", 2}, MismatchCase{"dtype", "auto", 2},
                      MismatchCase{"count", "auto", 3}, MismatchCase{"dtype", "auto", 5},
                      MismatchCase{"count", "auto", 8}, MismatchCase{"dtype", "auto", 8}),
    [](const auto& info) { return info.param.kind + "_np" + std::to_string(info.param.ranks); });

}  // namespace
}  // namespace tributary::integration
