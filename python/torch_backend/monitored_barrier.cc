// TributaryBackend::monitoredBarrier (dist.monitored_barrier), as torch's gloo backend does
// it: every rank but 0 tells rank 0 it arrived and waits for rank 0's release; rank 0 waits
// for every rank's arrival, bounded by the barrier's timeout, and raises naming the ranks
// that did not arrive (the first, in rank order, or all of them with wait_all_ranks), else
// releases them. Messages go on the group's point-to-point links under tags no send / recv
// can use (torch's tags are >= 0 ints, below 2^31), one pair of tags per call, so calls in
// the same order on every rank match. Synchronous, like gloo's: it is a debugging aid for
// finding the rank that hangs, not a collective of the queue's order.
//
// A rank that did not arrive makes rank 0's receive time out, which fails the group's
// point-to-point links (their errors are sticky: point_to_point.h), so the ranks waiting
// for their release fail at once, saying rank 0 has the faulty rank's name, rather than
// after their own timeout. The same stickiness means that when one rank's link fails early
// (the rank left: its connection closed), rank 0's receives from ranks that had not arrived
// yet fail with that rank's error: those are not named as failing (they may have been on
// their way), only said to be unchecked. A timeout is different: every receive shares the
// deadline, so each one that failed was still waiting when it passed.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "python/torch_backend/backend.h"

namespace tributary::python::torch_backend {
namespace {

constexpr std::uint32_t kMonitoredTags = 0x80000000u;
constexpr std::uint32_t kCheck = 0x6d6f6e69;  // "moni": a receive of anything else mismatches

// Point-to-point operations of one call, waited for together. The callbacks hold it (and
// the one-byte buffers the operations use) until the last of them ran.
class Pending : public std::enable_shared_from_this<Pending> {
 public:
  explicit Pending(std::size_t n) : status_(n), order_(n), buffers_(n) {}
  std::span<std::byte> buffer(std::size_t i) { return {&buffers_[i], 1}; }
  PointToPoint::Done done(std::size_t i) {
    std::lock_guard lock(mu_);
    ++left_;
    return [self = shared_from_this(), i](const Status& s) {
      std::lock_guard lock(self->mu_);
      self->status_[i] = s;
      self->order_[i] = self->finished_++;
      if (--self->left_ == 0) self->cv_.notify_all();
    };
  }
  // Every operation has a deadline of its own, so every callback runs; `until` only guards.
  bool wait(Deadline until) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, until.at, [&] { return left_ == 0; });
  }
  Status status(std::size_t i) {
    std::lock_guard lock(mu_);
    return status_[i];
  }
  // The position of operation i among those finished (0: the first).
  std::size_t order(std::size_t i) {
    std::lock_guard lock(mu_);
    return order_[i];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_ = 0;
  std::size_t finished_ = 0;
  std::vector<Status> status_;
  std::vector<std::size_t> order_;
  std::vector<std::byte> buffers_;
};

std::string ms(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

std::string join(const std::vector<int>& ranks) {
  std::string list;
  for (int r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return list;
}

}  // namespace

void TributaryBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const std::chrono::milliseconds timeout =
      opts.timeout == c10d::kUnsetTimeout ? setup_.timeout : opts.timeout;
  TORCH_CHECK(timeout.count() > 0, "tributary: monitored_barrier: the timeout must be positive");
  if (size_ == 1) return;
  const std::uint32_t round = monitored_rounds_.fetch_add(1);
  const std::uint32_t arrive = kMonitoredTags | ((2 * round) & 0x7ffffffeu);
  const std::uint32_t release = arrive | 1u;
  const Deadline deadline = Deadline::after(timeout);
  const Deadline guard = Deadline::after(timeout + std::chrono::seconds(10));
  const auto n = static_cast<std::size_t>(size_);
  auto pending = std::make_shared<Pending>(n);
  if (rank_ != 0) {
    {
      std::lock_guard lock(finish_mu_);
      PointToPoint& p = peers("monitored_barrier with", 0);
      p.send(0, arrive, kCheck, pending->buffer(0), deadline, pending->done(0));
      p.recv(0, release, kCheck, pending->buffer(1), deadline, pending->done(1));
    }
    const bool all_done = pending->wait(guard);
    Status st = all_done ? pending->status(0) : error(StatusCode::kTimedOut, "no answer");
    if (st.is_ok()) st = pending->status(1);
    TORCH_CHECK(st.is_ok(), "tributary: Rank ", rank_,
                " successfully reached monitoredBarrier, but received errors while waiting for "
                "send/recv from rank 0 (",
                st.to_string(), "). Please check rank 0 logs for faulty rank.");
    return;
  }
  {
    std::lock_guard lock(finish_mu_);
    for (int r = 1; r < size_; ++r) {
      PointToPoint& p = peers("monitored_barrier with", r);
      const auto i = static_cast<std::size_t>(r);
      p.recv(r, arrive, kCheck, pending->buffer(i), deadline, pending->done(i));
    }
  }
  const bool all_done = pending->wait(guard);
  // The rank whose receive failed first caused the failure; see the file's comment for who
  // else is named.
  int first = -1;
  for (int r = 1; r < size_ && all_done; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (pending->status(i).is_ok()) continue;
    if (first < 0 || pending->order(i) < pending->order(static_cast<std::size_t>(first))) first = r;
  }
  const bool timed_out =
      !all_done || (first > 0 && pending->status(static_cast<std::size_t>(first)).code() ==
                                     StatusCode::kTimedOut);
  std::vector<int> missing;
  std::vector<int> unchecked;
  std::string why;
  for (int r = 1; r < size_; ++r) {
    const Status st = all_done ? pending->status(static_cast<std::size_t>(r))
                               : error(StatusCode::kTimedOut, "no answer");
    if (st.is_ok()) continue;
    if (!timed_out && r != first) {
      unchecked.push_back(r);
      continue;
    }
    missing.push_back(r);
    if (why.empty()) why = st.to_string();
    if (!wait_all_ranks) break;
  }
  if (!missing.empty()) {
    std::string also;
    if (wait_all_ranks && !unchecked.empty()) {
      also = "; rank" + std::string(unchecked.size() > 1 ? "s " : " ") + join(unchecked) +
             " could not be checked after that";
    }
    TORCH_CHECK(false, "tributary: [Rank 0]: Rank", missing.size() > 1 ? "s " : " ", join(missing),
                " failed to pass monitoredBarrier in ", ms(timeout), " (", why, ")", also);
  }
  auto sends = std::make_shared<Pending>(n);
  {
    std::lock_guard lock(finish_mu_);
    for (int r = 1; r < size_; ++r) {
      PointToPoint& p = peers("monitored_barrier with", r);
      const auto i = static_cast<std::size_t>(r);
      p.send(r, release, kCheck, sends->buffer(i), deadline, sends->done(i));
    }
  }
  const bool sent = sends->wait(guard);
  std::string failed;
  for (int r = 1; r < size_ && sent; ++r) {
    const Status st = sends->status(static_cast<std::size_t>(r));
    if (!st.is_ok() && failed.empty()) failed = "rank " + std::to_string(r) + ": " + st.to_string();
  }
  TORCH_CHECK(sent && failed.empty(), "tributary: [Rank 0]: monitoredBarrier could not release ",
              failed.empty() ? std::string("every rank in time") : failed);
}

}  // namespace tributary::python::torch_backend
