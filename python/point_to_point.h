// Point-to-point messages among the members of one fixed group (torch's send / recv): links
// of their own, apart from the Worker's collectives, driven by a thread of their own, so that
// a receive posted before its send, sends and receives posted in any order by the members,
// and collectives issued meanwhile never wait on one another (torch posts isend / irecv and
// collectives freely; gloo serves point-to-point outside its collective order too).
//
// Contract:
//  - Members are the group's ranks 0..size-1; connect() builds a TCP link to every other
//    member (addresses exchanged through the caller's `exchange`, connections authenticated
//    with the cluster secret, TLS as WorkerConfig::tls says).
//  - Matching: a send to rank d with tag t is received by d's recv from this rank with tag t;
//    messages with the same (peer, tag) match in posting order (MPI's non-overtaking rule),
//    different tags in any order (a message that arrives first is buffered, up to the TCP
//    link's bound per peer; beyond it the sender waits).
//  - A receive names the exact byte count and the sender's `check` (the backend: the dtype):
//    a message of another length or check fails with kMismatch on the receiver.
//  - A receive from any member (recv_any, torch's recvAnysource) takes the first message with
//    its tag that has arrived whole from anyone and is not claimed by a receive naming its
//    sender; receives from any member are served in posting order, members in turn from the
//    one after the last served. A message is claimed by a receive naming its sender if that
//    receive was posted before it arrived whole: receives that name their sender come first.
//    Only messages the link holds whole can be taken this way (the TCP link's bound per
//    peer: 256 MiB by default; a larger one waits for its deadline).
//  - Buffers belong to the operation until its callback ran; the callback runs once, on the
//    engine's thread (or on close()'s), and must be quick (torch: mark a Work's Future).
//  - Every operation has a deadline: one not done by then fails with kTimedOut.
//  - Errors are sticky, as on every Link (algorithms/link.h): the first failure (a peer gone,
//    a mismatch, a timeout) aborts the links, and it fails every pending and later operation,
//    named. A fixed group that lost a member cannot go on anyway.
//  - Threading: send(), recv() and close() from any thread. The destructor closes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "agent/worker.h"
#include "algorithms/pollable_link.h"
#include "core/clock.h"
#include "core/status.h"

namespace tributary::agent {
class DataPlane;
}

namespace tributary::python {

class PointToPoint {
 public:
  // Publishes this member's address (the string it is given) and returns every member's, by
  // rank; blocking, bounded by the caller (torch: its store's wait).
  using Exchange = std::function<Result<std::vector<std::string>>(const std::string& mine)>;
  using Done = std::function<void(const Status&)>;

  // `config`: secret, bind_host / advertise_host, tls, connect_attempt_timeout (transport is
  // always TCP: the engine polls its links without blocking in them).
  static Result<std::unique_ptr<PointToPoint>> connect(agent::WorkerConfig config, int rank,
                                                       int size, const Exchange& exchange,
                                                       Deadline deadline);
  ~PointToPoint();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  void send(int peer, std::uint32_t tag, std::uint32_t check, std::span<const std::byte> data,
            Deadline deadline, Done done);
  void recv(int peer, std::uint32_t tag, std::uint32_t check, std::span<std::byte> data,
            Deadline deadline, Done done);
  // A receive from any member: `from` gets the sender's rank (on the engine's thread) before
  // `done` runs, when a message is matched.
  void recv_any(std::uint32_t tag, std::uint32_t check, std::span<std::byte> data,
                Deadline deadline, std::function<void(int)> from, Done done);
  // Fails what is queued and pending with `why` (kAborted), stops the engine. Idempotent.
  void close(const Status& why);

 private:
  struct Op {
    bool is_send = false;
    int peer = -1;  // -1: a receive from any member, until it is matched
    std::function<void(int)> from;
    algorithms::Tag tag;
    std::span<std::byte> data;
    Deadline deadline;
    Done done;
    algorithms::Link::Handle handle = 0;
  };
  PointToPoint(int rank, int size);
  void submit(Op op);
  void run();
  // The first failure: aborts the link; every later operation fails with it.
  void fail(const Status& why);
  // Posts a receive naming its sender on the link. A message of that peer and tag that is
  // held whole is the one it takes (the link matches in order), so that message is no longer
  // one a receive from any member may take.
  algorithms::Link::Handle post_recv(Op& op);
  // Records the messages of `peer` that the link newly holds whole.
  void note_early(int peer);
  // Takes the first recorded message of `peer` with `tag` (now claimed); false if none.
  bool take_early(int peer, const algorithms::Tag& tag);
  // Matches the receives from any member, in order, to messages held whole; posts those.
  void match_any(std::vector<Op>& pending);

  int rank_;
  int size_;
  std::unique_ptr<agent::DataPlane> plane_;
  std::unique_ptr<algorithms::Link> link_;
  algorithms::PollableLink* pollable_ = nullptr;  // link_, driven by the engine thread only
  Status failed_;                                  // engine thread only
  // Engine thread only: per peer, the messages the link holds whole that no receive has
  // been posted for yet (sent stamped, so the link reports them: PollableLink::report_early),
  // in arrival order; the receives from any member not matched yet, in posting order; the
  // peer to look at first for the next of them.
  std::vector<std::deque<algorithms::EarlyArrival>> early_;
  std::deque<Op> any_;
  int next_any_peer_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> incoming_;  // guarded by mu_
  bool closing_ = false;     // guarded by mu_
  Status close_why_;         // guarded by mu_
  std::thread engine_;
};

}  // namespace tributary::python
