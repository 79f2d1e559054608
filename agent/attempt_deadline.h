// The deadline of one attempt of a collective (docs/fault-tolerance.md, "Failure
// detection"): the data-plane progress deadline adapted to the measured throughput,
// capped by the caller's collective timeout. Pure: time is passed in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::agent {

struct AttemptDeadline {
  Deadline deadline;
  // The collective timeout, not the adaptive deadline, is the binding one: an attempt
  // that runs out of time failed because of it.
  bool capped = false;
};

// floor + slack x bytes / throughput (bytes per second) from `start`, at most `timeout`
// from `start` (timeout zero: no cap).
inline AttemptDeadline attempt_deadline(TimePoint start, std::size_t bytes, double throughput,
                                        Duration floor, double slack, Duration timeout) {
  const double seconds = static_cast<double>(bytes) / throughput * slack;
  const Duration adaptive =
      floor + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
  if (timeout > Duration::zero() && timeout < adaptive) return {{start + timeout}, true};
  return {{start + adaptive}, false};
}

// The status of an attempt that failed with `status` at `now` under `deadline`: a time-out
// under the collective timeout says so, naming the setting, so that an operator reading the
// recovery's log line knows which knob fired.
inline Status attempt_status(const Status& status, const AttemptDeadline& deadline, TimePoint now,
                             Duration timeout, std::string_view op, std::uint64_t seq) {
  if (status.code() != StatusCode::kTimedOut || !deadline.capped || !deadline.deadline.passed(now))
    return status;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  return error(StatusCode::kTimedOut,
               std::string(op) + " seq " + std::to_string(seq) + " did not complete within the " +
                   "collective timeout of " + std::to_string(ms) +
                   " ms (WorkerConfig::collective_timeout, --timeout-ms): " + status.message());
}

}  // namespace tributary::agent
