// An in-process Link for tests and benchmarks: ranks are threads, messages are copied
// through per-rank mailboxes. It can inject what real networks do to collectives:
// delay a rank's messages, kill a rank (its peers see kPeerLost), freeze a rank (it goes
// silent, as under SIGSTOP: peers see kTimedOut at their deadline), fail one link,
// silence it, or hold its messages back until it is released. Its links are pollable (pollable_link.h).
#pragma once

#include <memory>
#include <vector>

#include "algorithms/pollable_link.h"

namespace tributary::algorithms {

class MemoryFabric {
 public:
  explicit MemoryFabric(int size);
  ~MemoryFabric();
  MemoryFabric(const MemoryFabric&) = delete;
  MemoryFabric& operator=(const MemoryFabric&) = delete;

  int size() const;
  // The link of `rank`; owned by the fabric, valid for its lifetime.
  Link& link(int rank);
  // The same link, with its pollable side (what a failover link's path needs).
  PollableLink& pollable(int rank);

  // Whether the links combine (Link::combines, recv_combine: the receive reduces into its
  // destination), so collectives take their fused paths. Off by default; set before use.
  void set_combining(bool on);
  // Messages sent by `rank` become visible to their receiver `delay` after the send.
  void set_delay(int rank, Duration delay);
  // Messages from `from` to `to` only, as above.
  void set_delay(int from, int to, Duration delay);
  // `rank` is dead: its own operations fail with kAborted, peers waiting on it (now or
  // later) fail with kPeerLost, as when a process is killed and its sockets reset.
  void kill(int rank);
  // `rank` goes silent: nothing it sent from now on is delivered, nothing fails
  // explicitly; its peers notice only through their deadlines.
  void freeze(int rank);
  // The link between a and b breaks in both directions (kPeerLost on both sides).
  void fail_link(int a, int b);
  // The link between a and b goes silent in both directions, as when a cable is pulled:
  // nothing fails, nothing sent from now on arrives (what was sent before still does).
  void silence_link(int a, int b);
  // The link between a and b holds what is sent on it, in both directions, as TCP does
  // over a cable that is pulled and put back: nothing fails, nothing arrives until
  // release_link(a, b) delivers everything held, in order, and lets later sends through.
  void hold_link(int a, int b);
  void release_link(int a, int b);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary::algorithms
