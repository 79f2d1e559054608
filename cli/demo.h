// The local cluster demo: a coordinator and N worker processes training the digits MLP.
// By default it shows what Tributary is for: along the way one worker is killed (kill -9),
// one frozen (SIGSTOP, then SIGCONT), one added and one drained (SIGTERM), each announced
// in the progress table as it happens and followed by what the cluster did about it
// (cli/demo_narrator.h). With `ha`, replicated coordinators on a local etcd, the leader
// killed mid-run (cli/ha_control_plane.h).
//
// The console shows the table and the narration; the processes' logs, the transcript, the
// per-step CSV and a plot of loss and accuracy with the faults marked go to a run
// directory named at the end. The run ends by checking that every surviving worker holds
// the same parameters and that every fault was handled.
#pragma once

#include <string>
#include <vector>

#include "cli/train_workload.h"

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
  bool verbose = false;                 // the processes' logs on the terminal too
  std::string run_dir;                  // "": a new directory under $TMPDIR (or /tmp)
  int print_every = 25;                 // the table's rows (the agents' --print-every)
  std::string plan;                     // the line announcing the default faults
  std::vector<std::string> agent_args;  // forwarded to every worker
  std::vector<std::string> coordinator_args;  // forwarded to the coordinator
};

bool has_faults(const DemoSpec& spec);

// The default faults (kill -9, SIGSTOP, a join, a drain) spread over the run that `train`
// makes with spec.workers workers; fewer with fewer than 3 workers, none for a run too
// short to show them. Returns the line that announces them.
std::string schedule_default_faults(DemoSpec& spec, const TrainSpec& train);

// Returns the process exit code: 0 when the run finished, the survivors agree and every
// injected fault was handled.
int run_demo(const DemoSpec& spec);

}  // namespace tributary::cli
