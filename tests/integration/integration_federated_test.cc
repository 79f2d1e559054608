// Federated rounds between real processes: a coordinator and 4 `tributary agent --workload
// federated-check` processes (cli/federated_check_workload.h). The last rank computes far
// longer than the round's deadline in odd rounds and briefly in even ones: it is late for
// the odd rounds (told, untouched, not evicted) and contributes to the even ones. Every
// contributor checks its result bit for bit against the reference of exactly the
// contributors and weights its outcome names; here the contributors of a round must agree
// on those and on the result's SHA-256.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

struct Line {
  int round = 0;
  std::string epoch;
  std::string member;
  bool contributed = false;
  std::string contributors;
  std::string sha;
  bool ok = false;
};

TEST(Federated, LateMembersAreToldAndContributeNextRoundAndResultsMatchTheReference) {
  TempDir dir;
  const std::string secret = "federated-secret";
  constexpr int kAgents = 4;
  constexpr int kRounds = 6;
  CoordinatorProcess coordinator(dir, "coordinator", secret, kAgents);
  ASSERT_FALSE(coordinator.wait_ready(deadline_after(seconds(30))).empty())
      << coordinator.process->dump();
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < kAgents; ++i) {
    agents.push_back(std::make_unique<Process>(
        dir, "agent" + std::to_string(i),
        agent_argv(coordinator.endpoint(), secret,
                   {"--workload", "federated-check", "--fed-rounds", std::to_string(kRounds),
                    "--fed-deadline-ms", "1000", "--fed-slow-ms", "2500"})));
  }
  auto dumps = [&] {
    std::string s = coordinator.process->dump();
    for (const auto& a : agents) s += a->dump();
    return s;
  };
  const auto deadline = deadline_after(seconds(120));
  for (auto& a : agents) {
    const auto code = a->wait_until(deadline);
    ASSERT_TRUE(code.has_value()) << a->name() << " hangs\n" << dumps();
    ASSERT_EQ(*code, 0) << a->name() << "\n" << dumps();
  }
  const std::regex line_re(
      R"(federated round (\d+) epoch (\d+) member (\d+) (contributed|late) contributors ([0-9:,]*) total [0-9.e+]+ sha256 ([0-9a-f]+|-) (ok|WRONG))");
  std::map<int, std::vector<Line>> by_round;
  for (const auto& a : agents) {
    const std::string out = a->out();
    EXPECT_NE(out.find("federated done"), std::string::npos) << a->name() << "\n" << dumps();
    for (std::sregex_iterator it(out.begin(), out.end(), line_re), end; it != end; ++it) {
      const std::smatch& m = *it;
      by_round[std::stoi(m[1])].push_back(
          {std::stoi(m[1]), m[2], m[3], m[4] == "contributed", m[5], m[6], m[7] == "ok"});
    }
  }
  ASSERT_EQ(by_round.size(), static_cast<std::size_t>(kRounds)) << dumps();
  std::map<std::string, int> late_rounds;  // member -> rounds it was late for
  for (const auto& [round, lines] : by_round) {
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(kAgents)) << "round " << round << "\n"
                                                                << dumps();
    std::set<std::string> contributor_lists, shas;
    int contributed = 0;
    for (const Line& l : lines) {
      EXPECT_TRUE(l.ok) << "round " << round << " member " << l.member << "\n" << dumps();
      EXPECT_EQ(l.epoch, "1") << "no view change: nobody was evicted\n" << dumps();
      contributor_lists.insert(l.contributors);
      if (l.contributed) {
        ++contributed;
        shas.insert(l.sha);
        EXPECT_NE(l.contributors.find(l.member + ":"), std::string::npos);
      } else {
        ++late_rounds[l.member];
        EXPECT_EQ(l.contributors.find(l.member + ":"), std::string::npos);
      }
    }
    EXPECT_EQ(contributor_lists.size(), 1u) << "round " << round << ": one outcome for all";
    EXPECT_EQ(shas.size(), 1u) << "round " << round << ": the contributors' bits agree";
    // Odd rounds: the slow rank is late; even rounds: everyone contributes.
    EXPECT_EQ(contributed, round % 2 == 1 ? kAgents - 1 : kAgents) << "round " << round << "\n"
                                                                   << dumps();
  }
  ASSERT_EQ(late_rounds.size(), 1u) << "one member is late, always the same\n" << dumps();
  EXPECT_EQ(late_rounds.begin()->second, kRounds / 2);
  const std::string coordinator_log = coordinator.process->err() + coordinator.process->out();
  EXPECT_EQ(coordinator_log.find("removed member"), std::string::npos)
      << "a late member must not be evicted (straggler policy)\n"
      << dumps();
  EXPECT_NE(coordinator_log.find("round 2 committed"), std::string::npos) << dumps();
}

}  // namespace
}  // namespace tributary::integration
