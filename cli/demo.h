// The local cluster demo: a coordinator and N worker processes training the digits MLP,
// with optional fault injection (kill -9, SIGSTOP/SIGCONT, a join, a drain, a straggler)
// driven by the training progress the workers print; with `ha`, replicated coordinators on
// a local etcd, the leader killed mid-run (cli/ha_control_plane.h). The controller relays the
// workers' output, and at the end checks that every surviving worker holds the same parameters.
#pragma once

#include <string>
#include <vector>

namespace tributary::cli {

struct DemoSpec {
  int workers = 4;
  int zones = 1;  // workers split into this many zones (launcher.h, zone_args)
  bool federated = false;  // the federated workload (cli/federated_workload.h) instead of training
  long timeout_s = 600;
  long kill_at = -1;                    // a worker kills itself with SIGKILL at this global step
  long stop_at = -1;                    // a worker SIGSTOPs itself at this step ...
  long stop_for_ms = 3000;              // ... and the controller SIGCONTs it this much later
  long join_at = -1;                    // the controller starts one more worker at this step
  long drain_at = -1;                   // the controller sends a worker SIGTERM at this step
  int straggler_ms = 0;                 // one worker computes this much slower every step
  bool ha = false;                      // a local etcd and three replicated coordinators ...
  long kill_leader_at = 100;            // ... the leader killed with SIGKILL at this step
  std::vector<std::string> agent_args;  // forwarded to every worker
  std::vector<std::string> coordinator_args;  // forwarded to the coordinator
};

// Returns the process exit code: 0 when the run finished and the survivors agree.
int run_demo(const DemoSpec& spec);

}  // namespace tributary::cli
