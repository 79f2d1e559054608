// kill -9 of the coordinator mid-soak and a restart on the same endpoint with the same
// journal: the agents resume, training continues with identical bits, and the restarted
// coordinator's epochs are all larger than any the first one issued.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/fault/soak_cluster.h"

namespace tributary::fault {
namespace {

std::vector<std::uint64_t> view_epochs(const std::string& log) {
  static const std::regex re(R"(view epoch (\d+) )");
  std::vector<std::uint64_t> epochs;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    epochs.push_back(std::stoull((*it)[1]));
  }
  return epochs;
}

TEST(FaultRestart, CoordinatorKillNineAndRestartMidSoak) {
  TempDir journal_dir;
  const std::string journal = journal_dir.file("coordinator.journal");
  SoakCluster cluster(4, {"--journal", journal},
                      {"--soak-count", "1048576", "--soak-steps", "1000000"});
  ASSERT_FALSE(cluster.endpoint.empty());
  for (int i = 0; i < 4; ++i) cluster.add_agent();
  std::vector<Process*> everyone = except(cluster.agents, {});
  ASSERT_TRUE(cluster.wait_steps(everyone, 3, deadline_after(seconds(60)))) << cluster.dump();

  Process& first = *cluster.coordinator->process;
  first.signal(SIGKILL);
  ASSERT_TRUE(first.wait_until(deadline_after(seconds(10))));
  const auto old_epochs = view_epochs(first.err());
  ASSERT_FALSE(old_epochs.empty()) << cluster.dump();
  const std::uint64_t old_max = *std::max_element(old_epochs.begin(), old_epochs.end());
  const long step_at_kill = cluster.max_step();

  // The same endpoint (agents only know that one), the same journal. The port was just
  // released; if the bind loses a race, try again (bounded).
  Process* second = nullptr;
  ASSERT_TRUE(poll_until(
      deadline_after(seconds(20)),
      [&] {
        const std::string ready = cluster.dir.file(
            "coordinator2.endpoint." + std::to_string(cluster.extra_coordinators.size()));
        cluster.extra_coordinators.push_back(std::make_unique<Process>(
            cluster.dir, "coordinator2_" + std::to_string(cluster.extra_coordinators.size()),
            std::vector<std::string>{tributary_bin(), "coordinator", "--bind", cluster.endpoint,
                                     "--ready-file", ready, "--world-size", "4", "--secret",
                                     cluster.secret, "--journal", journal}));
        Process& p = *cluster.extra_coordinators.back();
        const bool up = poll_until(deadline_after(seconds(5)), [&] {
          return !read_file(ready).empty() || p.poll().has_value();
        });
        if (up && !p.exited()) {
          second = &p;
          return true;
        }
        return false;
      }))
      << "the coordinator could not be restarted on " << cluster.endpoint << "\n"
      << cluster.dump();

  // It resumes the journaled members and issues a view with a larger epoch.
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)), [&] {
    return !view_epochs(second->err()).empty();
  })) << cluster.dump();
  const auto new_epochs = view_epochs(second->err());
  EXPECT_GT(*std::min_element(new_epochs.begin(), new_epochs.end()), old_max) << cluster.dump();
  std::cout << "first coordinator's last epoch " << old_max << ", the restarted one's first "
            << new_epochs.front() << "; step at the kill " << step_at_kill << "\n";

  // Training continues through the new coordinator: steps committed in its views.
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)),
                         [&] {
                           for (Process* p : everyone) {
                             const AgentReport r = parse_report(p->out());
                             if (r.steps.empty() || r.steps.back().view <= old_max) return false;
                           }
                           return true;
                         }))
      << "no step committed in a view of the restarted coordinator\n"
      << cluster.dump();
  ASSERT_TRUE(cluster.wait_steps(everyone, cluster.max_step() + 3, deadline_after(seconds(30))))
      << cluster.dump();
  for (Process* p : everyone) {
    EXPECT_EQ(parse_report(p->out()).members.size(), 1u) << p->name() << " had to rejoin\n"
                                                         << cluster.dump();
  }
  const Consistency c = cluster.expect_consistent();
  std::cout << c.steps_seen << " steps, " << c.cross_checked << " cross-checked lines\n";
  drain_and_expect_clean_exit(cluster, everyone, deadline_after(seconds(60)));
}

}  // namespace
}  // namespace tributary::fault
