#include "agent/collective_queue.h"

#include <exception>
#include <utility>

namespace tributary::agent {

bool CollectiveTicket::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

Result<Outcome> CollectiveTicket::wait(Deadline deadline) const {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline.at, [&] { return done_; })) {
    return error(StatusCode::kTimedOut,
                 op_ + " (collective #" + std::to_string(index_) + ") still pending at deadline");
  }
  return result_;
}

TimePoint CollectiveTicket::started_at() const {
  std::lock_guard lock(mu_);
  return started_;
}

TimePoint CollectiveTicket::finished_at() const {
  std::lock_guard lock(mu_);
  return finished_;
}

void CollectiveTicket::mark_started() {
  std::lock_guard lock(mu_);
  started_ = std::chrono::steady_clock::now();
}

void CollectiveTicket::finish(Result<Outcome> result) {
  {
    std::lock_guard lock(mu_);
    finished_ = std::chrono::steady_clock::now();
    if (started_ == TimePoint{}) started_ = finished_;
    result_ = std::move(result);
    done_ = true;
  }
  cv_.notify_all();
}

CollectiveQueue::CollectiveQueue() : thread_([this] { run(); }) {}

CollectiveQueue::~CollectiveQueue() {
  close(error(StatusCode::kAborted, "the collective queue was destroyed"));
  thread_.join();
}

void CollectiveQueue::complete(Entry& entry, Result<Outcome> result) {
  if (entry.on_done) entry.on_done(result);
  entry.ticket->finish(std::move(result));
}

std::shared_ptr<const CollectiveTicket> CollectiveQueue::submit(std::string op, Job job,
                                                                Completion on_done) {
  std::unique_lock lock(mu_);
  auto ticket = std::make_shared<CollectiveTicket>(++submitted_, std::move(op));
  Entry entry{ticket, std::move(job), std::move(on_done)};
  if (closed_) {
    const Status why = closed_why_;
    lock.unlock();
    complete(entry, why);
    return ticket;
  }
  queued_.push_back(std::move(entry));
  lock.unlock();
  work_cv_.notify_one();
  return ticket;
}

Status CollectiveQueue::wait_idle(Deadline deadline) {
  std::unique_lock lock(mu_);
  if (!idle_cv_.wait_until(lock, deadline.at, [&] { return queued_.empty() && !running_; })) {
    return error(StatusCode::kTimedOut, std::to_string(queued_.size() + (running_ ? 1 : 0)) +
                                            " collectives still pending at deadline");
  }
  return Status::ok();
}

bool CollectiveQueue::idle() const {
  std::lock_guard lock(mu_);
  return queued_.empty() && !running_;
}

void CollectiveQueue::close(const Status& why) {
  std::deque<Entry> refused;
  Status reason;
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      closed_ = true;
      closed_why_ = why;
    }
    reason = closed_why_;
    refused.swap(queued_);
  }
  work_cv_.notify_all();
  for (Entry& e : refused) complete(e, reason);
  idle_cv_.notify_all();
}

void CollectiveQueue::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    // An idle queue waits for work without a deadline: close() is what ends this wait.
    work_cv_.wait(lock, [&] { return !queued_.empty() || closed_; });
    if (queued_.empty()) return;
    Entry entry = std::move(queued_.front());
    queued_.pop_front();
    running_ = true;
    lock.unlock();
    entry.ticket->mark_started();
    Result<Outcome> result = error(StatusCode::kInternal, "not run");
    try {
      result = entry.job();
    } catch (const std::exception& e) {
      result = error(StatusCode::kInternal, entry.ticket->op() + ": " + e.what());
    } catch (...) {
      result = error(StatusCode::kInternal, entry.ticket->op() + ": unknown exception");
    }
    complete(entry, std::move(result));
    entry = Entry{};  // the job's captures go before the queue reports idle
    lock.lock();
    running_ = false;
    if (queued_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace tributary::agent
