// What the demo tells its viewer, decided without processes, pipes or clocks: the
// controller (cli/demo.cc) feeds it what it did (faults), what the workers report
// (cli/demo_events.h) and the view changes the coordinator records (`tributary status`'s
// history), and prints the lines it returns. From those it keeps one record per injected
// fault: which view answered it, who noticed, how long the survivors paused, what state a
// (re)joiner received, so the run can end with a recovery summary and a verdict.
//
// Times come in with the events: steady-clock microseconds (mono_us) for steps and
// faults, wall-clock milliseconds (unix_ms) for faults and view changes. Workers are
// named by the demo's numbering ("worker 3"); members reach it as "host/tributary:PID",
// matched by pid.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/demo_events.h"
#include "membership/cluster_status.h"

namespace tributary::cli {

enum class FaultKind { kKill, kStop, kJoin, kDrain };
std::string to_string(FaultKind kind);  // "kill -9", "SIGSTOP", "join", "drain"

// One fault the controller injected, and what the cluster did about it.
struct FaultRecord {
  FaultKind kind = FaultKind::kKill;
  int worker = 0;  // the demo's number of the worker it hit (or started)
  int pid = 0;
  long step = 0;  // the newest step committed when it happened
  std::int64_t mono_us = 0;
  std::int64_t unix_ms = 0;

  // The view that removed the worker (kill, stop, drain) or admitted it (join).
  std::optional<std::uint64_t> view;
  std::int64_t view_unix_ms = 0;
  std::string reason;      // the removal's reason ("failure_confirmed", "left", ...)
  std::string noticed_by;  // "worker 2", "the coordinator", ...
  // The gap between the last step committed before the view and the first one in it
  // (one step's compute included), and the typical step before the fault.
  std::optional<std::int64_t> pause_us;
  std::int64_t typical_step_us = 0;
  long resumed_step = 0;
  int world_after = 0;

  // SIGSTOP: when it was continued, and its return as a new member.
  std::optional<std::int64_t> continued_mono_us;
  std::optional<std::uint64_t> rejoin_view;
  std::optional<std::int64_t> rejoin_pause_us;
  // join, or a stopped worker's rejoin: the training state it received.
  std::optional<StateEvent> state;
  // drain: the process exited on its own with status 0.
  bool exited_cleanly = false;

  // The fault ran its course: removal seen and training went on; a stopped worker also
  // came back with verified state; a joiner received verified state; a drained worker
  // left with status 0.
  bool handled() const;
};

// One committed step as first reported by any worker.
struct StepRecord {
  long step = 0;
  long data_epoch = 0;
  std::uint64_t view = 0;
  int world = 0;
  double loss = 0;
  std::int64_t mono_us = 0;
  std::optional<double> accuracy;
};

class DemoNarrator {
 public:
  DemoNarrator(int print_every, std::int64_t start_mono_us);

  // A worker process the controller started; `joiner`: after the start.
  std::vector<std::string> worker_started(int worker, int pid, bool joiner, long step,
                                          std::int64_t mono_us, std::int64_t unix_ms);
  // The controller's fault (join: worker_started does it). Returns the fault's line.
  std::vector<std::string> fault(FaultKind kind, int worker, int pid, std::int64_t mono_us,
                                 std::int64_t unix_ms);
  // SIGCONT to a stopped worker.
  std::vector<std::string> continued(int worker, std::int64_t mono_us);
  // A worker process exited with `status` (exit code, or 128 + signal).
  std::vector<std::string> exited(int worker, int status);
  std::vector<std::string> event(int worker, const DemoEvent& event);
  // Every change of the coordinator's history, in epoch order (older ones and repeats
  // are ignored).
  std::vector<std::string> view_change(const membership::ViewChange& change);

  // Training is over (rank 0 printed its summary): members leaving now are not narrated.
  void training_finished() { finished_ = true; }
  static std::string table_header();
  // The recovery summary: a row per fault and the verdict line.
  std::vector<std::string> summary() const;
  bool all_handled() const;

  long latest_step() const { return latest_step_; }
  const std::vector<FaultRecord>& faults() const { return faults_; }
  const std::map<long, StepRecord>& steps() const { return steps_; }
  std::int64_t start_mono_us() const { return start_mono_us_; }

 private:
  std::string worker_name(int pid) const;  // "worker 3", or the member name as given
  std::vector<std::string> resolve_pauses();
  std::int64_t typical_step_us(long before_step) const;
  FaultRecord* open_fault(int worker, bool removal);
  FaultRecord& record(FaultKind kind, int worker, int pid, long step, std::int64_t mono_us,
                      std::int64_t unix_ms);

  int print_every_;
  std::int64_t start_mono_us_;
  std::map<int, int> worker_of_pid_;
  std::map<long, StepRecord> steps_;
  std::vector<FaultRecord> faults_;
  std::uint64_t last_view_ = 0;
  long latest_step_ = 0;
  bool finished_ = false;
};

// "1.23 s" / "412 ms"
std::string format_duration_us(std::int64_t us);
// The pid at the end of a member name "host/program:PID"; 0 when there is none.
int pid_of_member_name(const std::string& name);

}  // namespace tributary::cli
