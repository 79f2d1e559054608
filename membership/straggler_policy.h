// The straggler policy (docs/fault-tolerance.md, "Stragglers"), as pure functions.
//
// Per step, each member of the view reports its compute time (end of the previous step's
// last collective -> its step boundary). A member straggles in a step when its time
// exceeds both k x the step's median and `floor_seconds`; the median is the lower median
// over the step's reporters (with two members that is the faster one's time, so the slow
// one of a pair can be flagged). A member is evicted when it straggled in at least M of
// its last W evaluated steps, but never so that the view drops below min_world_size.
// After an eviction the member (by name) may not rejoin before `cooldown` has passed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "membership/view.h"

namespace tributary::membership {

struct StragglerConfig {
  bool enabled = true;
  double k = 2.0;               // lag threshold, in multiples of the step's median
  double floor_seconds = 0.05;  // never a straggler below this compute time
  std::size_t m = 3;            // straggling steps ...
  std::size_t w = 5;            // ... out of the last W evaluated steps
  Duration cooldown = std::chrono::seconds(60);
  std::size_t min_world_size = 2;  // never evict below this many members
};

// kInvalidArgument naming the field.
Status validate(const StragglerConfig& config);

// The lower median (0 for none).
double lower_median(std::vector<double> values);

struct StepVerdict {
  MemberId id = 0;
  double seconds = 0;
  bool straggler = false;
};
// One verdict per reporter of a complete step, in id order; `median` is set to the median.
std::vector<StepVerdict> judge_step(const StragglerConfig& config,
                                    const std::map<MemberId, double>& times, double* median);

// Appends `straggled` to a member's history, keeping the last W.
void record_verdict(const StragglerConfig& config, std::deque<bool>& history, bool straggled);
// Straggling steps in the history (the last W).
std::size_t straggling_steps(const std::deque<bool>& history);
// True when the history reaches M of W.
bool should_evict(const StragglerConfig& config, const std::deque<bool>& history);

}  // namespace tributary::membership
