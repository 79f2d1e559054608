// `tributary coordinator`: its flags and the process's main loop.
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <string>

#include "coordinator/coordinator.h"

namespace tributary::cli {

struct CoordinatorFlags {
  coordinator::CoordinatorConfig config;
  long heartbeat_timeout_ms = 1000;
  long heartbeat_interval_ms = 100;
  long ready_timeout_ms = 2000;
  long straggler_floor_ms = 50;
  long straggler_cooldown_s = 60;
  bool no_straggler_eviction = false;
  bool no_confirm_on_close = false;
  std::string ready_file;
  long lease_s = 2;
};

// Registers the coordinator's flags on `cmd`, filling `f`.
void add_coordinator_flags(CLI::App& cmd, CoordinatorFlags& f);

// Binds, writes the ready file if asked, and serves until `stop` is set; the exit status.
int run_coordinator(CoordinatorFlags& f, const std::atomic<bool>& stop);

}  // namespace tributary::cli
