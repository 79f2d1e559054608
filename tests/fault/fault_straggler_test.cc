// A straggler slowed inside its step (an agent with far more per-step compute than the
// others) is evicted by the coordinator's policy, logged by name and counted in
// tributary_evictions_total{reason="straggler",member=NAME}; the others keep committing
// identical steps without it.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/fault/soak_cluster.h"
#include "tests/integration/http_get.h"

namespace tributary::fault {
namespace {

TEST(FaultStraggler, SlowAgentIsEvictedByThePolicyNamedInLogAndMetrics) {
  SoakCluster cluster(
      4,
      {"--metrics", "127.0.0.1:0", "--straggler-k", "2", "--straggler-m", "3", "--straggler-w", "5",
       "--straggler-floor-ms", "50", "--straggler-cooldown-s", "30"},
      {"--soak-count", "262144", "--soak-steps", "1000000", "--soak-delay-ms", "10"});
  ASSERT_FALSE(cluster.endpoint.empty());
  const auto listening = cluster.coordinator->process->wait_for_line(
      std::regex(R"(listening on \S+, metrics on port (\d+))"), deadline_after(seconds(10)));
  ASSERT_TRUE(listening) << cluster.dump();
  const int metrics_port = std::stoi((*listening)[1]);
  for (int i = 0; i < 3; ++i) cluster.add_agent();
  Process& slow = cluster.add_agent({"--soak-slow-ms", "400"});
  std::vector<Process*> fast = except(cluster.agents, {&slow});

  // The coordinator names members "<host>/tributary:<pid>".
  const std::string name_suffix = "/tributary:" + std::to_string(slow.pid());
  const std::regex evicting(R"(straggler: evicting member (\d+) \('([^']+)'\))");
  std::optional<std::vector<std::string>> line;
  ASSERT_TRUE(poll_until(deadline_after(seconds(60)),
                         [&] {
                           line = cluster.coordinator->process->wait_for_line(
                               evicting, deadline_after(seconds(0)));
                           return line.has_value();
                         }))
      << "no straggler eviction\n"
      << cluster.dump();
  const std::string name = (*line)[2];
  EXPECT_TRUE(name.size() > name_suffix.size() && name.ends_with(name_suffix))
      << "evicted '" << name << "', the slow agent is pid " << slow.pid() << "\n"
      << cluster.dump();
  std::cout << "evicted " << name << "\n";

  // Counted, with the member named.
  const std::string series =
      "tributary_evictions_total{member=\"" + name + "\",reason=\"straggler\"} ";
  std::string body;
  EXPECT_TRUE(poll_until(deadline_after(seconds(10)),
                         [&] {
                           auto r = http_get("127.0.0.1", metrics_port, "/metrics");
                           if (!r || r->status != 200) return false;
                           body = r->body;
                           return body.find(series) != std::string::npos;
                         }))
      << "no " << series << "in /metrics:\n"
      << body;

  // The fast ones keep committing among themselves, with the same bits.
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)), [&] {
    for (Process* p : fast) {
      const AgentReport r = parse_report(p->out());
      if (r.steps.empty() || r.steps.back().contributors.size() != 3) return false;
    }
    return true;
  })) << cluster.dump();
  ASSERT_TRUE(cluster.wait_steps(fast, cluster.max_step() + 3, deadline_after(seconds(30))))
      << cluster.dump();
  // The evicted straggler waits out its cool-down (30 s) trying to rejoin: refused.
  ASSERT_TRUE(
      slow.wait_for_line(std::regex("join refused .*cool-down"), deadline_after(seconds(30))))
      << cluster.dump();
  const Consistency c = cluster.expect_consistent();
  std::cout << c.steps_seen << " steps, " << c.cross_checked << " cross-checked lines\n";
  drain_and_expect_clean_exit(cluster, fast, deadline_after(seconds(60)));
  slow.kill_all();
}

}  // namespace
}  // namespace tributary::fault
