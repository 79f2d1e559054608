// A Link that can also be asked, without giving anything up, whether an operation has
// finished, and be driven for a while: what a link that multiplexes several links (the
// per-pair failover of transport/failover_link.h) needs, since Link::wait() is
// destructive (an operation whose wait gives up is withdrawn).
//
// Contract, on top of link.h:
// - test(h) is true once wait(h, any deadline) would return at once; it never blocks
//   and never withdraws the operation. wait(h) still has to be called to collect it.
// - drive(until) moves bytes for every pending operation and returns when something may
//   have finished, or at `until` (it may return early; callers loop).
// - Both belong to the thread that issues operations, like send/recv/wait.
#pragma once

#include "algorithms/link.h"

namespace tributary::algorithms {

class PollableLink : public Link {
 public:
  virtual bool test(Handle handle) = 0;
  virtual void drive(Deadline until) = 0;
  // Whether a waiter should keep polling this link while it makes progress rather than
  // sleep in drive(): true where nothing in the kernel wakes a sleeper when bytes arrive
  // (shared memory, where a sleep costs a doorbell through the peer's socket); false where
  // a sleep in drive() wakes on arrival (sockets), and polling would only take the CPU
  // from the processes that have the work.
  virtual bool polls_best() const { return false; }
};

}  // namespace tributary::algorithms
