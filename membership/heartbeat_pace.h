// How often members heartbeat, and how long a silence means a failure, as the membership
// grows: the coordinator's heartbeat budget.
//
// Every member heartbeats the coordinator once per interval. At the base interval
// (100 ms) 4,096 members send 40,960 messages a second, more than one core can answer
// (bench/results/membership_scale_*.md). With a budget of `max_rate` heartbeats a second
// the interval becomes max(base, members / max_rate): the load stays under the budget
// whatever the size, and the members learn the interval from every HeartbeatAck.
// Silences are judged in intervals, so the heartbeat timeout and the confirmation
// silence of failure reports scale by the same factor (scale() >= 1): a member is never
// declared dead for keeping the slower pace it was asked for.
//
// Guarantees:
//  - interval() >= base, and members / interval() <= max_rate (when max_rate > 0).
//  - scale() never drops faster than the members can follow: when the membership shrinks,
//    the larger scale stays in force for one timeout of that scale (members learn the new
//    interval within one old interval, from their next ack).
//  - base == 0 or max_rate == 0 turns pacing off: interval() == base, scale() == 1.
// Failure reports stay fast at any scale through probes (membership.h): the slower pace
// only lengthens the detection of a failure nobody reports.
#pragma once

#include <cstddef>

#include "core/clock.h"

namespace tributary::membership {

class HeartbeatPace {
 public:
  // `timeout` is the heartbeat timeout at the base interval (how long a scaled-down
  // scale keeps its predecessor in force).
  HeartbeatPace(Duration base, double max_rate, Duration timeout);

  // The membership now has `members` members.
  void resize(std::size_t members, TimePoint now);
  // The interval members are asked to heartbeat at.
  Duration interval() const { return interval_; }
  // The factor by which silences are judged longer at time `now` (>= 1).
  double scale(TimePoint now) const;
  // `d` stretched by scale(now).
  Duration scaled(Duration d, TimePoint now) const;

 private:
  Duration base_;
  double max_rate_;
  Duration timeout_;
  Duration interval_;
  double scale_ = 1.0;
  // After a shrink: the previous, larger scale holds until `previous_until_`.
  double previous_scale_ = 1.0;
  TimePoint previous_until_{};
};

}  // namespace tributary::membership
