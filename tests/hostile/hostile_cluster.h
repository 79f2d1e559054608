// What every hostile scenario needs around its attack: a soak cluster of real processes
// (tests/fault/soak_cluster.h) and the check that it came through: every agent committing
// again, the coordinator alive, every step bitwise identical on every member.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/fault/soak_cluster.h"

namespace tributary::hostile {

inline const std::vector<std::string> kCoordinatorFlags = {"--no-straggler-eviction"};

// Every agent keeps committing: `more` steps past where the furthest one is now.
inline void expect_progress(fault::SoakCluster& cluster, long more) {
  std::vector<integration::Process*> everyone = fault::except(cluster.agents, {});
  const long target = std::max(0L, cluster.max_step()) + more;
  EXPECT_TRUE(
      cluster.wait_steps(everyone, target, integration::deadline_after(std::chrono::seconds(60))))
      << "the members stopped committing steps\n"
      << cluster.dump();
  EXPECT_FALSE(cluster.coordinator->process->poll().has_value()) << "the coordinator exited\n"
                                                                 << cluster.dump();
  cluster.expect_consistent();
}

inline void start_agents(fault::SoakCluster& cluster, int n) {
  for (int i = 0; i < n; ++i) cluster.add_agent();
}

inline int coordinator_port(const fault::SoakCluster& cluster) {
  return std::stoi(cluster.endpoint.substr(cluster.endpoint.rfind(':') + 1));
}

}  // namespace tributary::hostile
