#include "control_client/coordinator_client.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <algorithm>

#include "control_client/client_impl.h"

namespace tributary::control_client {
namespace {

using membership::Epoch;
using membership::MemberId;
using membership::View;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// Deadline::max() means "no deadline"; keep it away from wait_until's arithmetic.
template <typename Predicate>
bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Deadline deadline,
                Predicate done) {
  if (deadline.at == TimePoint::max()) {
    cv.wait(lock, done);
    return true;
  }
  return cv.wait_until(lock, deadline.at, done);
}

}  // namespace

CoordinatorClient::CoordinatorClient(Logger log, prometheus::Registry* metrics)
    : impl_(std::make_unique<Impl>(std::move(log))) {
  if (metrics != nullptr) {
    impl_->size_gauge = &prometheus::BuildGauge()
                             .Name("tributary_membership_size")
                             .Help("Members in the view this agent holds")
                             .Register(*metrics)
                             .Add({});
    impl_->epoch_gauge = &prometheus::BuildGauge()
                              .Name("tributary_epoch")
                              .Help("Epoch of the view this agent holds")
                              .Register(*metrics)
                              .Add({});
  }
}

CoordinatorClient::~CoordinatorClient() = default;

Result<Joined> CoordinatorClient::join(const ClientConfig& config, Deadline deadline) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->id != 0 || impl_->worker.joinable()) {
      return error(StatusCode::kInvalidArgument, "join() called twice on one CoordinatorClient");
    }
  }
  try {
    return impl_->join(config, deadline);
  } catch (const zmq::error_t& e) {
    // Only setup calls throw (a malformed endpoint, no file descriptors).
    return error(StatusCode::kInvalidArgument,
                 "coordinator endpoint '" + config.endpoint + "': " + e.what());
  }
}

Result<View> CoordinatorClient::wait_for_view(Epoch min_epoch, Deadline deadline) {
  std::unique_lock lock(impl_->mu);
  if (impl_->id == 0) return error(StatusCode::kInvalidArgument, "wait_for_view() before join()");
  auto done = [&] { return impl_->view.epoch >= min_epoch || impl_->evicted || impl_->left; };
  if (!wait_until(impl_->cv, lock, deadline, done)) {
    return error(StatusCode::kTimedOut, "no view with epoch >= " + std::to_string(min_epoch) +
                                            " by the deadline (holding epoch " +
                                            std::to_string(impl_->view.epoch) + ")");
  }
  if (impl_->evicted)
    return error(StatusCode::kEvicted, "removed by the coordinator: " + impl_->evicted_reason);
  if (impl_->left) return error(StatusCode::kAborted, "this member left");
  return impl_->view;
}

void CoordinatorClient::set_view_listener(ViewListener listener) {
  std::lock_guard lock(impl_->listener_mu);
  impl_->listener = std::move(listener);
}

View CoordinatorClient::view() const {
  std::lock_guard lock(impl_->mu);
  return impl_->view;
}

MemberId CoordinatorClient::member_id() const {
  std::lock_guard lock(impl_->mu);
  return impl_->id;
}

void CoordinatorClient::set_step(std::uint64_t step) { impl_->step.store(step); }

Status CoordinatorClient::health() const {
  std::lock_guard lock(impl_->mu);
  if (impl_->id == 0) return error(StatusCode::kUnavailable, "not joined");
  if (impl_->evicted)
    return error(StatusCode::kEvicted, "removed by the coordinator: " + impl_->evicted_reason);
  if (impl_->left) return error(StatusCode::kAborted, "this member left");
  const auto silent = std::chrono::steady_clock::now() - impl_->last_ack;
  if (silent > 5 * impl_->interval) {
    return error(StatusCode::kUnavailable,
                 "coordinator " + impl_->endpoint + " acknowledged no heartbeat for " +
                     std::to_string(duration_cast<milliseconds>(silent).count()) + " ms");
  }
  return Status::ok();
}

Status CoordinatorClient::leave(Deadline deadline, const membership::LeaveTerms& terms) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->id == 0) return error(StatusCode::kInvalidArgument, "leave() before join()");
    if (impl_->evicted || impl_->left) return Status::ok();
    impl_->leaving = true;
    impl_->leave_terms = terms;
    impl_->leave_must_wait.clear();
  }
  impl_->wake('l');
  std::unique_lock lock(impl_->mu);
  auto done = [&] { return impl_->left || impl_->evicted || !impl_->leave_must_wait.empty(); };
  if (!wait_until(impl_->cv, lock, deadline, done)) {
    return error(StatusCode::kTimedOut, "coordinator " + impl_->endpoint +
                                            " did not acknowledge the leave by the deadline");
  }
  if (impl_->left || impl_->evicted) return Status::ok();
  return leave_must_wait(impl_->leave_must_wait);
}

Result<Go> CoordinatorClient::ready(const membership::ReadyReport& r, Deadline deadline) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->id == 0) return error(StatusCode::kInvalidArgument, "ready() before join()");
    if (r.epoch == 0) return error(StatusCode::kInvalidArgument, "ready() for epoch 0");
    impl_->pending_ready = r;
  }
  impl_->wake('r');
  std::unique_lock lock(impl_->mu);
  auto& im = *impl_;
  auto done = [&] {
    return (im.last_go && im.last_go->epoch >= r.epoch) || im.view.epoch > r.epoch || im.evicted ||
           im.left;
  };
  if (!wait_until(im.cv, lock, deadline, done)) {
    return error(StatusCode::kTimedOut,
                 "no Go for epoch " + std::to_string(r.epoch) + " by the deadline");
  }
  if (im.evicted)
    return error(StatusCode::kEvicted, "removed by the coordinator: " + im.evicted_reason);
  if (im.left) return error(StatusCode::kAborted, "this member left");
  if (im.last_go && im.last_go->epoch == r.epoch) return *im.last_go;
  return error(StatusCode::kAborted,
               "epoch " + std::to_string(r.epoch) + " was superseded by epoch " +
                   std::to_string(std::max(im.view.epoch, im.last_go ? im.last_go->epoch : 0)) +
                   " before its Go");
}

void CoordinatorClient::report_failure(Epoch epoch, MemberId suspect, const std::string& detail) {
  control::Envelope env;
  auto* f = env.mutable_failure_report();
  f->set_reporter(member_id());
  f->set_suspect(suspect);
  f->set_epoch(epoch);
  f->set_detail(detail.substr(0, control::kMaxDetailBytes));
  if (epoch == 0) return;  // nothing to report about "no view"
  impl_->post(std::move(env));
}

void CoordinatorClient::report_links(membership::Epoch epoch,
                                     std::vector<membership::LinkPath> links) {
  std::lock_guard lock(impl_->mu);
  impl_->links_epoch = epoch;
  impl_->links = std::move(links);
  impl_->links_changed = true;
}

void CoordinatorClient::report_step(std::uint64_t step, double compute_seconds) {
  if (!(compute_seconds >= 0.0)) compute_seconds = 0.0;
  compute_seconds = std::min(compute_seconds, control::kMaxComputeSeconds);
  control::Envelope env;
  auto* t = env.mutable_step_timing();
  t->set_member_id(member_id());
  t->set_epoch(view().epoch);
  t->set_step(step);
  t->set_compute_seconds(compute_seconds);
  t->set_arrival_unix_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
  impl_->post(std::move(env));
}

bool CoordinatorClient::joiners_pending() const { return impl_->joiners_pending.load(); }
bool CoordinatorClient::heard_recently() const {
  std::lock_guard lock(impl_->mu);
  if (impl_->evicted || impl_->leaving || impl_->left) return false;
  return std::chrono::steady_clock::now() - impl_->last_ack < impl_->interval * 3 / 2;
}

void CoordinatorClient::request_boundary(Epoch epoch, bool leaving) {
  if (epoch == 0) return;
  control::Envelope env;
  auto* b = env.mutable_boundary_request();
  b->set_member_id(member_id());
  b->set_epoch(epoch);
  b->set_leaving(leaving);
  {
    std::lock_guard lock(impl_->mu);
    impl_->pending_boundary = Impl::PendingBoundary{epoch, leaving};
  }
  impl_->post(std::move(env));
}

Status CoordinatorClient::Impl::round_unanswered(bool answered, const std::string& missing,
                                                 const std::string& superseded) const {
  if (!answered) {
    return error(StatusCode::kTimedOut,
                 "no " + missing + " from coordinator " + endpoint + " by the deadline");
  }
  if (evicted) return error(StatusCode::kEvicted, "removed by the coordinator: " + evicted_reason);
  if (left) return error(StatusCode::kAborted, "this member left");
  return error(StatusCode::kAborted,
               "view " + std::to_string(view.epoch) + " arrived before " + superseded);
}

Result<membership::RoundDecision> CoordinatorClient::await_round(
    const membership::RoundReady& request, Deadline deadline) {
  auto& im = *impl_;
  membership::RoundReady r = request;
  {
    std::lock_guard lock(im.mu);
    if (im.id == 0) return error(StatusCode::kInvalidArgument, "await_round() before join()");
    r.member = im.id;
    im.pending_round = r;
  }
  im.wake('r');
  std::unique_lock lock(im.mu);
  auto done = [&] {
    return im.round_answer(r) != nullptr || im.view.epoch > r.epoch || im.evicted || im.left;
  };
  const bool answered = wait_until(im.cv, lock, deadline, done);
  if (im.pending_round && im.pending_round->round == r.round) im.pending_round.reset();
  if (const auto* d = im.round_answer(r)) return *d;
  return im.round_unanswered(answered, "decision for round " + std::to_string(r.round),
                          "round " + std::to_string(r.round) + " was decided in epoch " +
                              std::to_string(r.epoch));
}

Status CoordinatorClient::commit_round(Epoch epoch, std::uint64_t round, Deadline deadline) {
  auto& im = *impl_;
  {
    std::lock_guard lock(im.mu);
    if (im.id == 0) return error(StatusCode::kInvalidArgument, "commit_round() before join()");
    im.pending_done = std::make_pair(epoch, round);
  }
  im.wake('r');
  std::unique_lock lock(im.mu);
  auto committed = [&] { return im.commits.contains({epoch, round}); };
  auto done = [&] { return committed() || im.view.epoch > epoch || im.evicted || im.left; };
  const bool answered = wait_until(im.cv, lock, deadline, done);
  im.pending_done.reset();
  if (committed()) return Status::ok();
  return im.round_unanswered(answered, "commit of round " + std::to_string(round),
                          "round " + std::to_string(round) + " of epoch " +
                              std::to_string(epoch) + " committed");
}

bool CoordinatorClient::left() const {
  std::lock_guard lock(impl_->mu);
  return impl_->left;
}

}  // namespace tributary::control_client
