// What a link that polls memory (shared-memory rings, RDMA completion queues) does between
// two looks while it waits for one of its operations: look again at once while the looks
// move something; every `pulse` of such busy progress also look at the peers' setup
// connections (a dead peer is seen only there: its memory does not say so); while nothing
// moves, give the core away (sched_yield: when ranks outnumber cores the peer may need this
// very one) until `busy_poll` has passed since the last progress; then sleep in poll(2)
// until woken or the deadline. Pure: the time is passed in; the links carry it out
// (transport/polling_wait.h, for ShmLink::wait and RdmaLink::wait).
#pragma once

#include <chrono>

#include "core/clock.h"

namespace tributary::transport {

class PollPace {
 public:
  static constexpr Duration kPulse = std::chrono::milliseconds(1);

  enum class Next : std::uint8_t {
    kLook,               // look again at once
    kLookAtConnections,  // a look at the peers' connections (no sleep), then again
    kYield,              // sched_yield, then look again
    kSleep,              // nothing moved for busy_poll: sleep until woken or the deadline
  };

  PollPace(TimePoint now, Duration busy_poll, Duration pulse = kPulse)
      : busy_poll_(busy_poll),
        pulse_(pulse),
        spin_until_(now + busy_poll),
        pulse_at_(spin_until_ + pulse) {}

  // After a look that moved something (`moved`) or not, at `now`.
  Next after(bool moved, TimePoint now) {
    if (moved) {
      spin_until_ = now + busy_poll_;
      if (now < pulse_at_) return Next::kLook;
      pulse_at_ = now + pulse_;
      return Next::kLookAtConnections;
    }
    return now < spin_until_ ? Next::kYield : Next::kSleep;
  }
  // Instead of sleeping the link found work of its own (acknowledgements to send): spin again.
  void found_work(TimePoint now) { spin_until_ = now + busy_poll_; }
  // The link slept until `now`: the next look at the connections is a pulse away.
  void slept(TimePoint now) { pulse_at_ = now + pulse_; }

 private:
  Duration busy_poll_;
  Duration pulse_;
  TimePoint spin_until_;
  TimePoint pulse_at_;
};

}  // namespace tributary::transport
