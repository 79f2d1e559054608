// Starting a local cluster on this machine: a coordinator (in-process or as a child) and N
// agent processes re-executed from this binary. Used by `tributary bench` and `demo`.
#pragma once

#include <string>
#include <vector>

#include "cli/child_process.h"

namespace tributary::cli {

struct LocalCluster {
  std::string coordinator_endpoint;
  std::vector<ChildProcess> agents;
};

// Starts `tributary coordinator` as a child process on an ephemeral port and waits (bounded)
// until it reports its endpoint through a ready file.
Result<ChildProcess> start_coordinator_process(int world_size, std::string* endpoint,
                                               Deadline deadline,
                                               const std::vector<std::string>& extra_args = {},
                                               const ChildOutput& output = {});

// Starts n agents: `<self> agent --coordinator E <agent_args...>`, split into `zones`
// zones by zone_args().
Result<std::vector<ChildProcess>> start_agents(int n, const std::string& endpoint,
                                               const std::vector<std::string>& agent_args,
                                               int zones = 1);

// `--zone zone-Z` for agent i of n split into `zones` contiguous zones of near-equal size
// (zone Z = i * zones / n); nothing when zones <= 1.
std::vector<std::string> zone_args(int i, int n, int zones);

// Waits for every agent (bounded); kills the stragglers at the deadline. Returns the first
// non-zero exit status (0 if all succeeded, 124 on timeout).
int wait_all(std::vector<ChildProcess>& agents, Deadline deadline);

// A random hex secret for a throw-away local cluster.
std::string random_secret();

}  // namespace tributary::cli
