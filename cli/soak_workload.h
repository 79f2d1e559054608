// The soak workload used by the fault-tolerance tests and the churn benchmark: every step,
// a step boundary and one large all-reduce (sum) of inputs that are a deterministic function
// of (member id, step, index), small integers so that any summation order is exact. Each
// committed step is checked against the reference sum over exactly the contributors the
// Outcome names, and a line is printed per step:
//   soak step S view E contributors id,id,... attempts A sha256 H ok|WRONG
// The elastic loop (agent/elastic_loop.h) rejoins after an eviction, through `start_worker`,
// and the rejoiner receives the state; a time limit or SIGTERM drains.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>

#include "agent/worker.h"

namespace tributary::cli {

struct SoakSpec {
  std::size_t count = 1 << 20;  // float32 elements per all-reduce (4 MiB)
  long steps = 200;             // committed steps before stopping (-1: until duration)
  long duration_ms = -1;        // stop after this long (-1: until steps)
  int step_delay_ms = 0;        // "compute" between steps
  long rejoin_after_ms = 1500;  // after an eviction, wait before joining again
};

// Returns kMismatch if any committed step's result differs from its reference.
Status run_soak(const std::function<Result<std::unique_ptr<agent::Worker>>()>& start_worker,
                const SoakSpec& spec, std::FILE* out);

}  // namespace tributary::cli
