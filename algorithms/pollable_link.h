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

#include <vector>

#include "algorithms/link.h"

namespace tributary::algorithms {

// A message that arrived whole before a receive was posted for it (report_early).
struct EarlyArrival {
  Tag tag;
  std::uint64_t length = 0;
  std::uint64_t stamp = 0;
};

class PollableLink : public Link {
 public:
  virtual bool test(Handle handle) = 0;
  virtual void drive(Deadline until) = 0;
  // One look without blocking (drive() with a deadline that has passed) that also says
  // whether it moved any bytes, for a waiter's pacing: a link that polls memory keeps a
  // waiter looking while bytes move, as its own wait() does. Links that cannot say look
  // and answer false.
  virtual bool look() {
    drive(Deadline{TimePoint::min()});
    return false;
  }
  // Whether a waiter should keep polling this link while it makes progress rather than
  // sleep in drive(): true where nothing in the kernel wakes a sleeper when bytes arrive
  // (shared memory, where a sleep costs a doorbell through the peer's socket); false where
  // a sleep in drive() wakes on arrival (sockets), and polling would only take the CPU
  // from the processes that have the work.
  virtual bool polls_best() const { return false; }

  // Stamps: a 64-bit value a send carries to the receive that takes it, in the header
  // the link sends anyway, so that a protocol layered on the link (the failover link's
  // message numbers) costs no message of its own. Only where carries_stamps().
  virtual bool carries_stamps() const { return false; }
  // send() whose message carries `stamp`.
  virtual Handle send_stamped(int peer, Tag tag, std::span<const std::byte> data,
                              std::uint64_t stamp);
  // The stamp of the message that receive `handle` took (0 when sent by plain send()):
  // valid once test(handle) holds and the receive succeeded, before wait() collects it.
  virtual std::uint64_t stamp(Handle handle) const;
  // Appends to `out` the stamped messages from `peer` that arrived whole before a receive
  // was posted for them, each once. They stay for the receive that will take them, also
  // after the connection to the peer fails or this link is aborted (as every message that
  // arrived whole does), so
  // a layered protocol may count them as received. Links that keep no such messages, or
  // cannot say, append nothing.
  virtual void report_early(int peer, std::vector<EarlyArrival>& out) {
    (void)peer;
    (void)out;
  }
  // The link whose connections carry the bytes: itself, or, for a link that forwards to
  // another (a test's fault injector), that one's. A reconnect puts its new connection
  // there (transport/failover_link.h, Reconnection).
  virtual PollableLink& carrier() { return *this; }
};

}  // namespace tributary::algorithms
