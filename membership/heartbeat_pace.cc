#include "membership/heartbeat_pace.h"

#include <algorithm>
#include <cmath>

namespace tributary::membership {

HeartbeatPace::HeartbeatPace(Duration base, double max_rate, Duration timeout)
    : base_(base), max_rate_(max_rate), timeout_(timeout), interval_(base) {}

void HeartbeatPace::resize(std::size_t members, TimePoint now) {
  if (base_ <= Duration::zero() || max_rate_ <= 0) return;
  const double needed_s = static_cast<double>(members) / max_rate_;  // seconds per round
  const double base_s = std::chrono::duration<double>(base_).count();
  const double scale = std::max(1.0, needed_s / base_s);
  if (scale < scale_) {
    // Members still heartbeat at the old pace until their next ack: keep judging them by
    // it for one (old) timeout.
    previous_scale_ = this->scale(now);
    previous_until_ = now + std::chrono::duration_cast<Duration>(timeout_ * previous_scale_);
  }
  scale_ = scale;
  interval_ = std::chrono::duration_cast<Duration>(base_ * scale_);
}

double HeartbeatPace::scale(TimePoint now) const {
  return now < previous_until_ ? std::max(scale_, previous_scale_) : scale_;
}

Duration HeartbeatPace::scaled(Duration d, TimePoint now) const {
  const double s = scale(now);
  if (s == 1.0) return d;
  return std::chrono::duration_cast<Duration>(
      std::chrono::duration<double, Duration::period>(static_cast<double>(d.count()) * s));
}

}  // namespace tributary::membership
