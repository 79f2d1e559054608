#include "membership/straggler_policy.h"

#include <algorithm>
#include <cmath>

namespace tributary::membership {

Status validate(const StragglerConfig& c) {
  auto bad = [](std::string what) {
    return error(StatusCode::kInvalidArgument, "straggler policy: " + what);
  };
  if (!(c.k >= 1.0) || !std::isfinite(c.k)) return bad("k must be a finite number >= 1");
  if (!(c.floor_seconds >= 0.0)) return bad("floor_seconds must be >= 0");
  if (c.w < 1) return bad("W must be >= 1");
  if (c.m < 1 || c.m > c.w) return bad("M must be in 1..W");
  if (c.cooldown < Duration::zero()) return bad("cooldown must be >= 0");
  if (c.min_world_size < 1) return bad("min_world_size must be >= 1");
  return Status::ok();
}

double lower_median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t mid = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  return values[mid];
}

std::vector<StepVerdict> judge_step(const StragglerConfig& config,
                                    const std::map<MemberId, double>& times, double* median) {
  std::vector<double> all;
  all.reserve(times.size());
  for (const auto& [id, t] : times) all.push_back(t);
  const double med = lower_median(all);
  if (median != nullptr) *median = med;
  std::vector<StepVerdict> out;
  out.reserve(times.size());
  for (const auto& [id, t] : times) {
    // A single reporter has nobody to lag behind.
    out.push_back({id, t, times.size() > 1 && t > config.k * med && t > config.floor_seconds});
  }
  return out;
}

void record_verdict(const StragglerConfig& config, std::deque<bool>& history, bool straggled) {
  history.push_back(straggled);
  while (history.size() > config.w) history.pop_front();
}

std::size_t straggling_steps(const std::deque<bool>& history) {
  return static_cast<std::size_t>(std::count(history.begin(), history.end(), true));
}

bool should_evict(const StragglerConfig& config, const std::deque<bool>& history) {
  return config.enabled && straggling_steps(history) >= config.m;
}

}  // namespace tributary::membership
