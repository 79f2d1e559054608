// An ordered, asynchronous queue of collectives in front of one Worker: the training thread
// submits a collective and goes on computing (the rest of backward, say) while the queue's
// own thread runs it on the Worker. Used by the Python binding (async collectives, the
// elastic trainer's gradient buckets) and the torch.distributed backend (its Work objects).
//
// Contract:
//  - Ordering: jobs run one at a time, strictly in submission order, on the queue's one
//    thread. Members of a cluster submit the same collectives in the same order, exactly as
//    with direct calls: that order is what gives a collective the same sequence number on
//    every member.
//  - Threading: while a job is queued or running, the queue's thread is the Worker's one
//    user (worker.h). The owner may call the Worker itself (step_boundary, leave) only while
//    the queue is idle: after wait_idle() returned ok and before its next submit(). submit(),
//    wait_idle(), close() and every ticket call are thread-safe.
//  - Buffers: the memory a job reads and writes belongs to the queue from submit() until the
//    job's ticket is done(): the caller neither frees nor touches it before. A ticket wait()
//    that times out does not end that; the job may still run.
//  - Errors: a job's Status becomes its ticket's result and does not stop later jobs; the
//    Worker decides whether they can run (after an eviction every later one fails with
//    kEvicted, after a kMismatch the next runs on fresh links).
//  - View changes happen inside the Worker (docs/fault-tolerance.md): a collective aborted
//    by a failure re-runs in the next epoch with its original inputs and its Outcome names
//    the epoch and the contributors; jobs behind it run in that epoch. The queue does nothing
//    special. A caller that averages divides each result by its own Outcome::contributors.
//  - Abort: close(why) refuses new jobs and fails the queued jobs that have not started,
//    their tickets reporting `why`; the running job finishes (the Worker bounds it by its
//    recovery deadline). The destructor closes and joins the thread.
//  - Completion callbacks (optional, one per job) run on the queue's thread after the job and
//    before its ticket reports done (torch's Work marks its Future there); for a job refused
//    or failed by close(), on the thread that called submit() or close(). They must be quick
//    and must not submit to or wait on this queue. A job that throws fails with kInternal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/worker.h"
#include "core/clock.h"
#include "core/status.h"

namespace tributary::agent {

// One submitted job: its result once done, and when the queue's thread ran it.
class CollectiveTicket {
 public:
  explicit CollectiveTicket(std::uint64_t index, std::string op)
      : index_(index), op_(std::move(op)) {}

  std::uint64_t index() const { return index_; }  // submission number, from 1
  const std::string& op() const { return op_; }
  bool done() const;
  // The job's result, or kTimedOut when `deadline` passes first (the job is still pending).
  Result<Outcome> wait(Deadline deadline) const;
  // Steady-clock times the queue's thread started and finished the job (valid once done;
  // equal for a job refused or failed by close()).
  TimePoint started_at() const;
  TimePoint finished_at() const;

 private:
  friend class CollectiveQueue;
  void mark_started();
  void finish(Result<Outcome> result);

  const std::uint64_t index_;
  const std::string op_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  Result<Outcome> result_{Status(StatusCode::kInternal, "not run")};
  TimePoint started_{};
  TimePoint finished_{};
};

class CollectiveQueue {
 public:
  using Job = std::function<Result<Outcome>()>;
  using Completion = std::function<void(const Result<Outcome>&)>;

  CollectiveQueue();
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues `job` behind every job submitted before it. `op` names it in errors and logs.
  std::shared_ptr<const CollectiveTicket> submit(std::string op, Job job, Completion on_done = {});
  // Waits until every job submitted so far is done: ok, or kTimedOut at `deadline`.
  Status wait_idle(Deadline deadline);
  bool idle() const;
  // Refuses new jobs and fails the queued ones with `why` (see the contract above).
  void close(const Status& why);

 private:
  struct Entry {
    std::shared_ptr<CollectiveTicket> ticket;
    Job job;
    Completion on_done;
  };
  void run();
  static void complete(Entry& entry, Result<Outcome> result);

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the queue's thread waits for jobs
  std::condition_variable idle_cv_;  // wait_idle() waits for the queue to drain
  std::deque<Entry> queued_;
  bool running_ = false;  // a job is on the queue's thread now
  bool closed_ = false;
  Status closed_why_;
  std::uint64_t submitted_ = 0;
  std::thread thread_;
};

}  // namespace tributary::agent
