#include "python/py_worker.h"

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <utility>

#include "python/status_error.h"

namespace tributary::python {
namespace py = pybind11;

namespace {

Deadline deadline_in(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    throw_status(
        error(StatusCode::kInvalidArgument,
              "timeout must be a finite number of seconds >= 0, got " + std::to_string(seconds)));
  }
  return Deadline::after(
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds)));
}

double monotonic_seconds(TimePoint t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

agent::Outcome PyTicket::wait(double timeout_s) const {
  const Deadline deadline = deadline_in(timeout_s);
  Result<agent::Outcome> result = error(StatusCode::kInternal, "not waited");
  {
    py::gil_scoped_release release;
    result = ticket_->wait(deadline);
  }
  return value_or_throw(std::move(result));
}

double PyTicket::started_at() const { return monotonic_seconds(ticket_->started_at()); }
double PyTicket::finished_at() const { return monotonic_seconds(ticket_->finished_at()); }

PyWorker::PyWorker(std::unique_ptr<agent::Worker> owned, agent::Worker* worker)
    : owned_(std::move(owned)),
      worker_(worker),
      queue_(std::make_unique<agent::CollectiveQueue>()) {}

std::shared_ptr<PyWorker> PyWorker::start(const agent::WorkerConfig& config) {
  Result<std::unique_ptr<agent::Worker>> started = error(StatusCode::kInternal, "not started");
  {
    py::gil_scoped_release release;
    started = agent::Worker::start(config);
  }
  std::unique_ptr<agent::Worker> owned = value_or_throw(std::move(started));
  agent::Worker* w = owned.get();
  return std::shared_ptr<PyWorker>(new PyWorker(std::move(owned), w));
}

std::shared_ptr<PyWorker> PyWorker::borrow(agent::Worker& worker) {
  return std::shared_ptr<PyWorker>(new PyWorker(nullptr, &worker));
}

PyWorker::~PyWorker() { (void)close(); }

agent::Worker& PyWorker::worker() {
  if (worker_ == nullptr) {
    throw_status(error(StatusCode::kInvalidArgument,
                       "this Worker is closed (it left the cluster, or the elastic loop replaced "
                       "it after an eviction)"));
  }
  return *worker_;
}

void PyWorker::reap() {
  while (!inflight_.empty() && inflight_.front().first->done()) inflight_.pop_front();
}

std::shared_ptr<PyTicket> PyWorker::submit(std::string op, py::object keep, Job job) {
  agent::Worker& w = worker();
  reap();
  auto ticket = queue_->submit(std::move(op), [&w, job = std::move(job)] { return job(w); });
  inflight_.emplace_back(ticket, std::move(keep));
  return std::make_shared<PyTicket>(std::move(ticket));
}

void PyWorker::wait_idle(double timeout_s) {
  const Deadline deadline = deadline_in(timeout_s);
  Status s;
  {
    py::gil_scoped_release release;
    s = queue_->wait_idle(deadline);
  }
  reap();
  ok_or_throw(s);
}

agent::BoundaryOutcome PyWorker::step_boundary(double timeout_s) {
  agent::Worker& w = worker();
  wait_idle(timeout_s);
  Result<agent::BoundaryOutcome> r = error(StatusCode::kInternal, "not run");
  {
    py::gil_scoped_release release;
    r = w.step_boundary();
  }
  return value_or_throw(std::move(r));
}

agent::FederatedOutcome PyWorker::federated_round(std::uintptr_t address, std::size_t count,
                                                  const agent::FederatedRound& round,
                                                  double timeout_s) {
  agent::Worker& w = worker();
  wait_idle(timeout_s);  // the Worker has one user at a time: not while a job runs
  Result<agent::FederatedOutcome> r = error(StatusCode::kInternal, "not run");
  {
    py::gil_scoped_release release;
    r = w.federated_round(reinterpret_cast<float*>(address), count, round);
  }
  return value_or_throw(std::move(r));
}

void PyWorker::register_state(const std::string& name, std::uintptr_t address, std::size_t nbytes,
                              py::object keep, double timeout_s) {
  agent::Worker& w = worker();
  wait_idle(timeout_s);  // the Worker has one user at a time: not while a job runs
  w.register_state(name, std::span(reinterpret_cast<std::byte*>(address), nbytes));
  state_[name] = std::move(keep);
}

void PyWorker::shut_down_queue() {
  if (!queue_) return;
  {
    py::gil_scoped_release release;
    // The destructor fails what is queued and joins the thread once the running job is
    // done; the Worker bounds that job by its recovery deadline.
    queue_.reset();
  }
  inflight_.clear();
}

Status PyWorker::close() {
  shut_down_queue();
  Status left;
  if (owned_) {
    py::gil_scoped_release release;
    left = owned_->leave();
    owned_.reset();
  }
  worker_ = nullptr;
  state_.clear();
  return left;
}

void PyWorker::detach() { (void)close(); }

}  // namespace tributary::python
