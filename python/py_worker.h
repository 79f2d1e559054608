// The Python face of one agent::Worker (module tributary._tributary). Every collective goes
// through the Worker's CollectiveQueue (agent/collective_queue.h), so Python can start one and
// keep computing (async) or wait for it, with the GIL released either way.
//
// Lifetime rules (the binding's contract):
//  - Buffers: a collective reads and writes the memory of Python objects (NumPy arrays, torch
//    tensors) that the Python layer (tributary/_arrays.py) checked: CPU, contiguous, dtype and
//    size. The PyWorker holds a reference to those objects until the job is done, whether or
//    not the caller keeps its Ticket, so their memory cannot be freed under the queue. Done
//    jobs' references are dropped by a Python thread (holding the GIL) on its next call in,
//    never by the queue's thread.
//  - GIL: released while a collective, a join, a step boundary or a wait runs; the queue's
//    thread never takes it.
//  - Ownership: a PyWorker owns its Worker (started from Python) or borrows it from the
//    elastic loop (python/py_elastic.h), which detaches it before it drops that Worker; any
//    later call on a detached PyWorker raises InvalidArgument.
//  - State registered for joiners stays referenced for the Worker's life.
//  - close() (and the destructor) fails the queued jobs, lets the running one finish, drops
//    the references, and leaves the cluster when the Worker is owned.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/collective_queue.h"
#include "agent/worker.h"

namespace tributary::python {

// A submitted collective as Python sees it.
class PyTicket {
 public:
  explicit PyTicket(std::shared_ptr<const agent::CollectiveTicket> ticket)
      : ticket_(std::move(ticket)) {}
  bool done() const { return ticket_->done(); }
  // The Outcome; raises the job's error, or TimedOut after `timeout_s` (the job goes on).
  agent::Outcome wait(double timeout_s) const;
  // time.monotonic() seconds (both are CLOCK_MONOTONIC) when the queue ran the job.
  double started_at() const;
  double finished_at() const;
  const std::string& op() const { return ticket_->op(); }
  std::uint64_t index() const { return ticket_->index(); }

 private:
  std::shared_ptr<const agent::CollectiveTicket> ticket_;
};

class PyWorker {
 public:
  using Job = std::function<Result<agent::Outcome>(agent::Worker&)>;

  static std::shared_ptr<PyWorker> start(const agent::WorkerConfig& config);
  static std::shared_ptr<PyWorker> borrow(agent::Worker& worker);
  ~PyWorker();
  PyWorker(const PyWorker&) = delete;
  PyWorker& operator=(const PyWorker&) = delete;

  // The Worker, for properties; raises when detached.
  agent::Worker& worker();
  bool attached() const { return worker_ != nullptr; }

  // Queues `job`; `keep` (the buffers' owners) stays referenced until it is done.
  std::shared_ptr<PyTicket> submit(std::string op, pybind11::object keep, Job job);
  // Waits (GIL released) until every submitted job is done; TimedOut after `timeout_s`.
  void wait_idle(double timeout_s);
  // Waits for the queue, then runs the step boundary (joins, drains, state sync).
  agent::BoundaryOutcome step_boundary(double timeout_s);
  // Waits for the queue, then runs a federated round on `count` float32 at `address`
  // (docs/federated.md): the round's decision may take up to its deadline.
  agent::FederatedOutcome federated_round(std::uintptr_t address, std::size_t count,
                                          const agent::FederatedRound& round, double timeout_s);
  // `nbytes` bytes at `address`, owned by `keep`, sent to joiners under `name`.
  void register_state(const std::string& name, std::uintptr_t address, std::size_t nbytes,
                      pybind11::object keep, double timeout_s);
  // Fails what is queued, waits for the running job, drops every reference; leaves the
  // cluster if owned (bounded by the Worker's own deadline) and returns how that went.
  Status close();
  // For the elastic loop: the borrowed Worker is about to go away.
  void detach();

 private:
  PyWorker(std::unique_ptr<agent::Worker> owned, agent::Worker* worker);
  void reap();
  void shut_down_queue();

  std::unique_ptr<agent::Worker> owned_;
  agent::Worker* worker_ = nullptr;
  std::unique_ptr<agent::CollectiveQueue> queue_;
  std::deque<std::pair<std::shared_ptr<const agent::CollectiveTicket>, pybind11::object>> inflight_;
  std::map<std::string, pybind11::object> state_;
};

// Binds Worker, WorkerConfig, Outcome, BoundaryOutcome and Ticket on `m`.
void bind_worker(pybind11::module_& m);

}  // namespace tributary::python
