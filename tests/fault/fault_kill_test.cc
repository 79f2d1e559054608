// kill -9 of agents in the middle of a 4 MiB ring all-reduce (reduce-scatter
// and all-gather phases), at random offsets within the measured step time, at N
// = 8, 7, 6, 5, 4 (three rounds, joiners refilling the world in between: 15
// kills); and two kills within one step. The survivors must continue, every
// committed step must be the same bits on every agent that printed it, equal to
// the reference over exactly the contributors it names, and nothing may hang.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/fault/soak_cluster.h"

namespace tributary::fault {
namespace {

const std::vector<std::string> kAgentArgs = {"--soak-count", "1048576",     "--soak-steps",
                                             "1000000",      "--algorithm", "ring"};

// The mean step time of the live agents over `steps` steps (bounded wait).
double measure_step_seconds(SoakCluster& cluster, const std::vector<Process*>& live, long steps) {
  const long from = cluster.max_step();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(cluster.wait_steps(live, from + steps, deadline_after(seconds(30))))
      << cluster.dump();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(steps);
}

TEST(FaultKill, KillNineAtRandomPointsOfALargeAllReduceAtEightDownToFourThreeRounds) {
  const std::uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (TRIBUTARY_FAULT_SEED replays it)\n";
  std::mt19937_64 rng(seed);
  SoakCluster cluster(8, {}, kAgentArgs);
  ASSERT_FALSE(cluster.endpoint.empty());
  for (int i = 0; i < 8; ++i) cluster.add_agent();
  std::set<const Process*> dead;
  ASSERT_TRUE(cluster.wait_steps(except(cluster.agents, dead), 2, deadline_after(seconds(60))))
      << cluster.dump();

  // Three rounds of kills from N = 8 down to 3; between rounds, joiners refill
  // the world.
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      for (int i = 0; i < 5; ++i) cluster.add_agent();
      std::vector<Process*> live = except(cluster.agents, dead);
      ASSERT_TRUE(poll_until(deadline_after(seconds(60)),
                             [&] {
                               for (Process* p : live) {
                                 const AgentReport r = parse_report(p->out());
                                 if (r.steps.empty() || r.steps.back().contributors.size() != 8)
                                   return false;
                               }
                               return true;
                             }))
          << "the joiners did not bring the world back to 8\n"
          << cluster.dump();
    }
    for (int n = 8; n >= 4; --n) {
      std::vector<Process*> live = except(cluster.agents, dead);
      ASSERT_EQ(static_cast<int>(live.size()), n);
      const double period = measure_step_seconds(cluster, live, 3);
      Process& victim = *live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng)];
      const double offset = std::uniform_real_distribution<double>(0.0, period)(rng);
      const long at = wait_next_step(victim, deadline_after(seconds(30)));
      ASSERT_GE(at, 0) << cluster.dump();
      std::this_thread::sleep_for(std::chrono::duration<double>(offset));  // the injection point
      const std::uint64_t member = current_member(victim);
      victim.signal(SIGKILL);
      const auto killed_at = std::chrono::steady_clock::now();
      ASSERT_TRUE(victim.wait_until(deadline_after(seconds(10))))
          << "SIGKILL did not end " << victim.name();
      dead.insert(&victim);
      std::cout << "N=" << n << ": kill -9 " << victim.name() << " (member " << member << ") "
                << offset * 1e3 << " ms after its step " << at << " (step time " << period * 1e3
                << " ms)\n";

      // Survivors commit steps without the victim: the coordinator removed it.
      live = except(cluster.agents, dead);
      const std::regex removed("removed member " + std::to_string(member) + " ");
      ASSERT_TRUE(poll_until(deadline_after(seconds(30)),
                             [&] { return std::regex_search(cluster.coordinator_log(), removed); }))
          << "the coordinator never removed member " << member << "\n"
          << cluster.dump();
      ASSERT_TRUE(poll_until(deadline_after(seconds(30)),
                             [&] {
                               for (Process* p : live) {
                                 const AgentReport r = parse_report(p->out());
                                 if (r.steps.empty() ||
                                     static_cast<int>(r.steps.back().contributors.size()) != n - 1)
                                   return false;
                               }
                               return true;
                             }))
          << "the survivors did not commit a step at N=" << n - 1 << "\n"
          << cluster.dump();
      std::cout
          << "  survivors committed at N=" << n - 1 << " "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count() *
                 1e3
          << " ms after the kill\n";
    }
  }
  const Consistency c = cluster.expect_consistent();
  std::cout << c.steps_seen << " steps, " << c.cross_checked
            << " cross-checked lines, max attempts " << c.max_attempts << "\n";
  int all_gather_hits = 0;
  for (Process* p : except(cluster.agents, dead)) {
    all_gather_hits +=
        count_matches(p->err(), std::regex("all_reduce seq \\d+ in view \\d+ failed"));
  }
  std::cout << all_gather_hits
            << " survivor lines show the kill hit an all_reduce (not a step "
               "boundary)\n";
  drain_and_expect_clean_exit(cluster, except(cluster.agents, dead), deadline_after(seconds(60)));
}

TEST(FaultKill, TwoKillsInOneStep) {
  const std::uint64_t seed = test_seed();
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  SoakCluster cluster(6, {}, kAgentArgs);
  ASSERT_FALSE(cluster.endpoint.empty());
  for (int i = 0; i < 6; ++i) cluster.add_agent();
  std::set<const Process*> dead;
  std::vector<Process*> live = except(cluster.agents, dead);
  ASSERT_TRUE(cluster.wait_steps(live, 2, deadline_after(seconds(60)))) << cluster.dump();
  const double period = measure_step_seconds(cluster, live, 3);

  std::shuffle(live.begin(), live.end(), rng);
  Process& a = *live[0];
  Process& b = *live[1];
  const double offset = std::uniform_real_distribution<double>(0.0, period)(rng);
  ASSERT_GE(wait_next_step(a, deadline_after(seconds(30))), 0) << cluster.dump();
  std::this_thread::sleep_for(std::chrono::duration<double>(offset));
  const std::uint64_t ma = current_member(a), mb = current_member(b);
  a.signal(SIGKILL);
  b.signal(SIGKILL);
  ASSERT_TRUE(a.wait_until(deadline_after(seconds(10))));
  ASSERT_TRUE(b.wait_until(deadline_after(seconds(10))));
  dead = {&a, &b};
  std::cout << "kill -9 " << a.name() << " and " << b.name() << " (members " << ma << ", " << mb
            << ") " << offset * 1e3 << " ms into a step of " << period * 1e3 << " ms\n";
  live = except(cluster.agents, dead);
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)),
                         [&] {
                           for (Process* p : live) {
                             const AgentReport r = parse_report(p->out());
                             if (r.steps.empty() || r.steps.back().contributors.size() != 4)
                               return false;
                           }
                           return true;
                         }))
      << "the survivors did not commit a step at N=4\n"
      << cluster.dump();
  const long resumed = cluster.max_step();
  ASSERT_TRUE(cluster.wait_steps(live, resumed + 3, deadline_after(seconds(30)))) << cluster.dump();
  cluster.expect_consistent();
  drain_and_expect_clean_exit(cluster, live, deadline_after(seconds(60)));
}

}  // namespace
}  // namespace tributary::fault
