// SIGSTOP one agent mid-soak: the coordinator must remove it (a frozen process stops
// heartbeating), the others continue without it; after SIGCONT it learns it was evicted,
// rejoins at a step boundary, receives the state, and contributes again with the same bits.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/fault/soak_cluster.h"

namespace tributary::fault {
namespace {

TEST(FaultStop, StoppedAgentIsEvictedAndRejoinsCleanlyAfterSigcont) {
  SoakCluster cluster(4, {}, {"--soak-count", "1048576", "--soak-steps", "1000000"});
  ASSERT_FALSE(cluster.endpoint.empty());
  for (int i = 0; i < 4; ++i) cluster.add_agent();
  std::vector<Process*> everyone = except(cluster.agents, {});
  ASSERT_TRUE(cluster.wait_steps(everyone, 3, deadline_after(seconds(60)))) << cluster.dump();

  Process& victim = *cluster.agents[2];
  const std::uint64_t member = current_member(victim);
  ASSERT_NE(member, 0u);
  victim.signal(SIGSTOP);
  const auto stopped_at = std::chrono::steady_clock::now();
  std::vector<Process*> others = except(cluster.agents, {&victim});

  const std::regex removed("removed member " + std::to_string(member) + " ");
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)),
                         [&] { return std::regex_search(cluster.coordinator_log(), removed); }))
      << "a stopped member was never removed\n"
      << cluster.dump();
  const double detect =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)),
                         [&] {
                           for (Process* p : others) {
                             const AgentReport r = parse_report(p->out());
                             if (r.steps.empty() || r.steps.back().contributors.size() != 3)
                               return false;
                           }
                           return true;
                         }))
      << "the others did not continue without the stopped member\n"
      << cluster.dump();
  const double recover =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  std::cout << "SIGSTOP: removed after " << detect * 1e3
            << " ms, the others committed at N=3 after " << recover * 1e3 << " ms\n";
  const long before_cont = cluster.max_step();
  ASSERT_TRUE(cluster.wait_steps(others, before_cont + 3, deadline_after(seconds(30))))
      << cluster.dump();

  victim.signal(SIGCONT);
  // It hears it was evicted, rejoins as a new member, gets the state, and commits with the
  // others again: a step line naming all four.
  ASSERT_TRUE(victim.wait_for_line(std::regex("evicted at step"), deadline_after(seconds(30))))
      << "the resumed agent never learned it was evicted\n"
      << cluster.dump();
  ASSERT_TRUE(victim.wait_for_line(
      std::regex("received \\d+ state buffers from rank \\d+, SHA-256 verified"),
      deadline_after(seconds(30))))
      << cluster.dump();
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)),
                         [&] {
                           const AgentReport r = parse_report(victim.out());
                           return r.members.size() == 2 && !r.steps.empty() &&
                                  r.steps.back().member == r.members.back() &&
                                  r.steps.back().contributors.size() == 4;
                         }))
      << "the rejoined agent does not contribute\n"
      << cluster.dump();
  const AgentReport r = parse_report(victim.out());
  EXPECT_GT(r.members.back(), member) << "a rejoin is a new member";
  ASSERT_TRUE(cluster.wait_steps(everyone, cluster.max_step() + 3, deadline_after(seconds(30))))
      << cluster.dump();
  const Consistency c = cluster.expect_consistent();
  std::cout << c.steps_seen << " steps, " << c.cross_checked << " cross-checked lines\n";
  drain_and_expect_clean_exit(cluster, everyone, deadline_after(seconds(60)));
}

}  // namespace
}  // namespace tributary::fault
