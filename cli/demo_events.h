// The training agents' machine-readable progress, for the demo's controller (cli/demo.h):
// one line per event on the agent's stdout, starting with '@' so the controller can tell
// it from the human lines it relays. `tributary agent --workload train --events` writes
// them; the controller parses them back. One format, written and read here only.
//
//   @step STEP DATA_EPOCH VIEW WORLD RANK LOSS MONO_US   every committed step, every worker
//   @eval STEP ACCURACY                                   rank 0, every --print-every steps
//   @state STEP BYTES SOURCE_RANK SHA256                  a (re)joiner got the training state
//   @fault KIND STEP UNIX_MS                              the worker is about to raise its own
//                                                         fault (KIND: kill, stop)
//
// MONO_US is the steady clock (CLOCK_MONOTONIC, shared by every process on the machine) in
// microseconds: the controller compares workers' step times with its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace tributary::cli {

struct StepEvent {
  long step = 0;  // global steps committed, this one included
  long data_epoch = 0;
  std::uint64_t view = 0;  // epoch of the view whose members produced the step
  int world = 0;           // contributors to the step's all-reduce
  int rank = 0;
  double loss = 0;  // the averaged loss: equal on every worker
  std::int64_t mono_us = 0;
};

struct EvalEvent {
  long step = 0;
  double accuracy = 0;  // on the held-out test set, 0..1
};

struct StateEvent {
  long step = 0;  // the step the state was at
  std::uint64_t bytes = 0;
  int source_rank = -1;
  std::string sha256;  // hex, what both sides verified
};

// Written just before a worker raises SIGKILL or SIGSTOP on itself (--kill-at, --stop-at):
// the controller learns of the death or the stop later (when it reaps or polls), after the
// cluster may already have reacted, so the fault's time is the worker's own.
struct FaultEvent {
  std::string kind;  // "kill" or "stop"
  long step = 0;
  std::int64_t unix_ms = 0;  // wall clock, as the view changes are stamped
};

using DemoEvent = std::variant<StepEvent, EvalEvent, StateEvent, FaultEvent>;

std::string encode_event(const DemoEvent& event);  // no trailing newline
// nullopt for a line that is not an event (a human line) or a malformed one.
std::optional<DemoEvent> parse_event(const std::string& line);

// The steady clock in microseconds, as MONO_US.
std::int64_t mono_us_now();

}  // namespace tributary::cli
