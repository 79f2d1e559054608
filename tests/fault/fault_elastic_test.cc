// Elasticity with real processes: a join during the soak (the joiner gets the state,
// verified, and continues at the cluster's step), a drain by SIGTERM (nobody sees a
// failure, the leaver exits 0), and a kill during a joiner's state sync (of the state
// source, and of another member): the joiner still ends up with verified state and the
// same bits as everyone.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/fault/soak_cluster.h"

namespace tributary::fault {
namespace {

const std::regex kVerified("received \\d+ state buffers from rank \\d+, SHA-256 verified");

TEST(FaultElastic, JoinDuringSoakReceivesStateAndContinuesAtTheClustersStep) {
  SoakCluster cluster(3, {}, {"--soak-count", "1048576", "--soak-steps", "1000000"});
  ASSERT_FALSE(cluster.endpoint.empty());
  for (int i = 0; i < 3; ++i) cluster.add_agent();
  std::vector<Process*> first = except(cluster.agents, {});
  ASSERT_TRUE(cluster.wait_steps(first, 5, deadline_after(seconds(60)))) << cluster.dump();

  Process& joiner = cluster.add_agent();
  ASSERT_TRUE(joiner.wait_for_line(kVerified, deadline_after(seconds(30)))) << cluster.dump();
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)), [&] {
    return parse_report(joiner.out()).steps.size() >= 3;
  })) << cluster.dump();
  const AgentReport r = parse_report(joiner.out());
  EXPECT_GE(r.steps.front().step, 5)
      << "the joiner must continue at the cluster's step, not restart at 0";
  EXPECT_EQ(r.steps.front().contributors.size(), 4u) << cluster.dump();
  for (Process* p : first) {
    EXPECT_EQ(recovering_lines(*p), 0) << p->name() << " saw a failure during a join\n"
                                       << cluster.dump();
  }
  EXPECT_EQ(recovering_lines(joiner), 0) << cluster.dump();
  const Consistency c = cluster.expect_consistent();
  std::cout << "joiner's first step " << r.steps.front().step << "; " << c.cross_checked
            << " cross-checked lines\n";
  drain_and_expect_clean_exit(cluster, except(cluster.agents, {}), deadline_after(seconds(60)));
}

TEST(FaultElastic, DrainBySigtermLeavesCleanlyAndNobodySeesAFailure) {
  SoakCluster cluster(4, {}, {"--soak-count", "1048576", "--soak-steps", "1000000"});
  ASSERT_FALSE(cluster.endpoint.empty());
  for (int i = 0; i < 4; ++i) cluster.add_agent();
  ASSERT_TRUE(cluster.wait_steps(except(cluster.agents, {}), 3, deadline_after(seconds(60))))
      << cluster.dump();

  Process& leaver = *cluster.agents[1];
  const std::uint64_t member = current_member(leaver);
  leaver.signal(SIGTERM);
  const auto code = leaver.wait_until(deadline_after(seconds(30)));
  ASSERT_TRUE(code) << "the drained agent did not exit\n" << cluster.dump();
  EXPECT_EQ(*code, 0) << cluster.dump();
  EXPECT_TRUE(parse_report(leaver.out()).left) << cluster.dump();
  EXPECT_TRUE(
      std::regex_search(cluster.coordinator_log(),
                        std::regex("member " + std::to_string(member) + " \\('[^']*'\\) left")))
      << cluster.dump();

  std::vector<Process*> rest = except(cluster.agents, {&leaver});
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)), [&] {
    for (Process* p : rest) {
      const AgentReport r = parse_report(p->out());
      if (r.steps.empty() || r.steps.back().contributors.size() != 3) return false;
    }
    return true;
  })) << cluster.dump();
  ASSERT_TRUE(cluster.wait_steps(rest, cluster.max_step() + 3, deadline_after(seconds(30))))
      << cluster.dump();
  for (const auto& p : cluster.agents) {
    EXPECT_EQ(recovering_lines(*p), 0) << p->name() << " saw a failure during a drain\n"
                                       << cluster.dump();
  }
  EXPECT_EQ(count_matches(cluster.coordinator_log(), std::regex("removed member")), 0)
      << cluster.dump();
  cluster.expect_consistent();
  drain_and_expect_clean_exit(cluster, rest, deadline_after(seconds(60)));
}

// Kills a member as soon as the coordinator admits a joiner (its Go names the state
// source), so the kill lands in the state sync or just before it. `kill_source`: the
// state source itself, else another old member.
void kill_during_state_sync(bool kill_source) {
  // 4M floats: 16 MiB of registered data, so the sync takes a while.
  SoakCluster cluster(4, {}, {"--soak-count", "4194304", "--soak-steps", "1000000"});
  ASSERT_FALSE(cluster.endpoint.empty());
  for (int i = 0; i < 4; ++i) cluster.add_agent();
  std::vector<Process*> old = except(cluster.agents, {});
  ASSERT_TRUE(cluster.wait_steps(old, 2, deadline_after(seconds(60)))) << cluster.dump();
  std::map<std::uint64_t, Process*> by_member;
  for (Process* p : old) by_member[current_member(*p)] = p;

  const std::size_t log_mark = cluster.coordinator_log().size();
  Process& joiner = cluster.add_agent();
  const std::regex go(R"(go epoch (\d+): commit_through \d+, (\d+) joiners, state source (\d+))");
  std::uint64_t source = 0;
  // Polled every millisecond: the kill must land while the state is in flight.
  const auto deadline = deadline_after(seconds(30));
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string log = cluster.coordinator_log().substr(log_mark);
    std::smatch m;
    bool found = false;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), go); it != std::sregex_iterator();
         ++it) {
      if (std::stoi((*it)[2]) > 0) {
        source = std::stoull((*it)[3]);
        found = true;
        break;
      }
    }
    if (found) break;
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_NE(source, 0u) << "the joiner was never admitted\n" << cluster.dump();
  ASSERT_TRUE(by_member.count(source)) << "state source " << source << " is not an old member\n"
                                       << cluster.dump();
  Process* victim = by_member[source];
  if (!kill_source) {
    for (auto& [id, p] : by_member) {
      if (id != source) {
        victim = p;
        break;
      }
    }
  }
  victim->signal(SIGKILL);
  ASSERT_TRUE(victim->wait_until(deadline_after(seconds(10))));
  std::cout << "killed " << victim->name()
            << (kill_source ? " (the state source)" : " (not the source)") << "\n";

  std::vector<Process*> live = except(cluster.agents, {victim});
  ASSERT_TRUE(joiner.wait_for_line(kVerified, deadline_after(seconds(30))))
      << "the joiner never got verified state\n"
      << cluster.dump();
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)), [&] {
    for (Process* p : live) {
      const AgentReport r = parse_report(p->out());
      if (r.steps.empty() || r.steps.back().contributors.size() != 4)
        return false;  // 3 old + the joiner
    }
    return true;
  })) << cluster.dump();
  ASSERT_TRUE(cluster.wait_steps(live, cluster.max_step() + 2, deadline_after(seconds(30))))
      << cluster.dump();
  const std::string jerr = joiner.err();
  std::cout << "the joiner saw " << recovering_lines(joiner) << " failures ("
            << count_matches(jerr,
                             std::regex("state_(sync|source|hash) seq \\d+ in view \\d+ failed"))
            << " in the state sync itself)\n";
  cluster.expect_consistent();
  drain_and_expect_clean_exit(cluster, live, deadline_after(seconds(60)));
}

TEST(FaultElastic, KillTheStateSourceDuringAJoinersStateSync) { kill_during_state_sync(true); }
TEST(FaultElastic, KillAnotherMemberDuringAJoinersStateSync) { kill_during_state_sync(false); }

}  // namespace
}  // namespace tributary::fault
