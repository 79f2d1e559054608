// Time as a dependency. Heartbeats, deadlines, straggler windows and back-offs take a
// Clock so tests can drive time by hand instead of sleeping.
#pragma once

#include <atomic>
#include <chrono>

namespace tributary {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  static const SteadyClock& instance() {
    static const SteadyClock clock;
    return clock;
  }
};

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{}) : now_ns_(start.time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint{Duration{now_ns_.load()}}; }
  void advance(Duration d) { now_ns_ += d.count(); }
  void set(TimePoint t) { now_ns_ = t.time_since_epoch().count(); }

 private:
  std::atomic<Duration::rep> now_ns_;
};

// An absolute deadline on the steady clock; TimePoint::max() means "none" and is only for
// tests of the deadline machinery itself: every production wait has a finite deadline.
struct Deadline {
  TimePoint at = TimePoint::max();
  static Deadline after(Duration d) { return {std::chrono::steady_clock::now() + d}; }
  bool passed(TimePoint now = std::chrono::steady_clock::now()) const { return now >= at; }
};

}  // namespace tributary
