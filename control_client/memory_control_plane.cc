#include "control_client/memory_control_plane.h"

#include <algorithm>
#include <optional>
#include <thread>

namespace tributary::control_client {

using membership::Epoch;
using membership::MemberId;
using membership::View;

class MemoryCoordinator::Plane final : public ControlPlane {
 public:
  explicit Plane(MemoryCoordinator& c) : c_(c) {}
  ~Plane() override { set_view_listener(nullptr); }

  // As the client's own thread does, a thread of the plane's tells the listener what the
  // seat received, outside the coordinator's lock (views are applied under it by whichever
  // thread's call decided them).
  void set_view_listener(ViewListener listener) override {
    if (teller_.joinable()) {
      {
        std::lock_guard lock(c_.mu_);
        teller_stop_ = true;
      }
      c_.cv_.notify_all();
      teller_.join();
    }
    if (!listener) return;
    std::lock_guard lock(c_.mu_);
    if (id_ == 0) return;  // before join(): nothing to tell
    teller_stop_ = false;
    teller_ = std::thread(
        [this, listener = std::move(listener), told = c_.seats_.at(id_).view.epoch]() mutable {
          bool told_out = false;
          std::unique_lock lock(c_.mu_);
          for (;;) {
            const Seat& seat = c_.seats_.at(id_);
            c_.cv_.wait(lock, [&] {
              return teller_stop_ || seat.view.epoch > told || (seat.evicted && !told_out);
            });
            if (teller_stop_) return;
            std::optional<Result<View>> news;
            if (seat.view.epoch > told) {
              told = seat.view.epoch;
              news.emplace(seat.view);
            } else {
              told_out = true;
              news.emplace(out_status(seat));
            }
            lock.unlock();
            listener(*news);
            lock.lock();
          }
        });
  }

  Result<Joined> join(const ClientConfig& config, Deadline) override {
    std::lock_guard lock(c_.mu_);
    if (id_ != 0) return error(StatusCode::kInvalidArgument, "join() called twice");
    membership::MemberLabels labels{config.name.empty() ? config.host : config.name, config.host,
                                    config.zone, config.data_address, config.capabilities};
    TRIB_ASSIGN_OR_RETURN(membership::JoinDecision d,
                          c_.membership_.join(std::move(labels), c_.clock_.now()));
    id_ = d.id;
    c_.seats_[id_] = Seat{};
    c_.apply(d.decisions);
    return Joined{id_, c_.seats_[id_].view};
  }

  MemberId member_id() const override {
    std::lock_guard lock(c_.mu_);
    return id_;
  }

  Result<View> wait_for_view(Epoch min_epoch, Deadline deadline) override {
    std::unique_lock lock(c_.mu_);
    TRIB_RETURN_IF_ERROR(joined());
    const Seat& seat = c_.seats_.at(id_);
    if (!c_.wait(lock, deadline, [&] { return seat.view.epoch >= min_epoch || out(seat); })) {
      return error(StatusCode::kTimedOut,
                   "no view with epoch >= " + std::to_string(min_epoch) + " by the deadline");
    }
    TRIB_RETURN_IF_ERROR(out_status(seat));
    return seat.view;
  }

  Result<Go> ready(const membership::ReadyReport& report, Deadline deadline) override {
    std::unique_lock lock(c_.mu_);
    TRIB_RETURN_IF_ERROR(joined());
    const Seat& seat = c_.seats_.at(id_);
    if (!seat.silenced) c_.apply(c_.membership_.ready(id_, report, c_.clock_.now()));
    auto done = [&] {
      return (seat.go && seat.go->epoch >= report.epoch) || seat.view.epoch > report.epoch ||
             out(seat);
    };
    if (!c_.wait(lock, deadline, done)) {
      return error(StatusCode::kTimedOut,
                   "no Go for epoch " + std::to_string(report.epoch) + " by the deadline");
    }
    TRIB_RETURN_IF_ERROR(out_status(seat));
    if (seat.go && seat.go->epoch == report.epoch) return *seat.go;
    return error(StatusCode::kAborted,
                 "epoch " + std::to_string(report.epoch) + " was superseded before its Go");
  }

  void report_failure(Epoch epoch, MemberId suspect, const std::string&) override {
    std::lock_guard lock(c_.mu_);
    if (!speaks()) return;
    ++c_.failure_reports_;
    c_.apply(c_.membership_.failure_report(id_, epoch, suspect, now()));
  }

  void set_step(std::uint64_t step) override {
    std::lock_guard lock(c_.mu_);
    if (joined().is_ok()) c_.seats_.at(id_).step = step;
  }

  void report_step(std::uint64_t step, double compute_seconds) override {
    std::lock_guard lock(c_.mu_);
    if (speaks()) c_.apply(c_.membership_.step_timing(id_, step, compute_seconds, now()));
  }

  bool joiners_pending() const override {
    std::lock_guard lock(c_.mu_);
    return c_.membership_.joiners_pending();
  }

  // Every member that is not silenced heartbeats at every advance(): heard, unless it was
  // silenced (a killed or frozen process) or is out.
  bool heard_recently() const override {
    std::lock_guard lock(c_.mu_);
    return speaks() && out_status(c_.seats_.at(id_)).is_ok();
  }

  void request_boundary(Epoch epoch, bool leaving) override {
    std::lock_guard lock(c_.mu_);
    if (speaks()) c_.apply(c_.membership_.boundary(id_, epoch, leaving, now()));
  }

  Result<membership::RoundDecision> await_round(const membership::RoundReady& request,
                                                Deadline deadline) override {
    std::unique_lock lock(c_.mu_);
    TRIB_RETURN_IF_ERROR(joined());
    const Seat& seat = c_.seats_.at(id_);
    membership::RoundReady r = request;
    r.member = id_;
    if (!seat.silenced) c_.apply(c_.rounds_.ready(r, c_.membership_.view(), now()));
    auto answer = [&]() -> const membership::RoundDecision* {
      auto it = seat.rounds.find(r.round);
      return it != seat.rounds.end() && it->second.answers(id_, r.epoch) ? &it->second : nullptr;
    };
    auto done = [&] { return answer() != nullptr || seat.view.epoch > r.epoch || out(seat); };
    if (!c_.wait(lock, deadline, done)) {
      return error(StatusCode::kTimedOut,
                   "no decision for round " + std::to_string(r.round) + " by the deadline");
    }
    TRIB_RETURN_IF_ERROR(out_status(seat));
    if (const auto* d = answer()) return *d;
    return error(StatusCode::kAborted, "view " + std::to_string(seat.view.epoch) +
                                           " arrived before round " + std::to_string(r.round) +
                                           " was decided in epoch " + std::to_string(r.epoch));
  }

  Status commit_round(Epoch epoch, std::uint64_t round, Deadline deadline) override {
    std::unique_lock lock(c_.mu_);
    TRIB_RETURN_IF_ERROR(joined());
    const Seat& seat = c_.seats_.at(id_);
    if (!seat.silenced && !c_.lost_round_done_.contains(id_))
      c_.apply(c_.rounds_.done(id_, epoch, round));
    auto committed = [&] { return seat.commits.contains({epoch, round}); };
    auto done = [&] { return committed() || seat.view.epoch > epoch || out(seat); };
    if (!c_.wait(lock, deadline, done)) {
      return error(StatusCode::kTimedOut,
                   "no commit of round " + std::to_string(round) + " by the deadline");
    }
    TRIB_RETURN_IF_ERROR(out_status(seat));
    if (committed()) return Status::ok();
    return error(StatusCode::kAborted, "view " + std::to_string(seat.view.epoch) +
                                           " arrived before round " + std::to_string(round) +
                                           " of epoch " + std::to_string(epoch) + " committed");
  }

  Status leave(Deadline, const membership::LeaveTerms& terms) override {
    std::lock_guard lock(c_.mu_);
    if (id_ == 0) return error(StatusCode::kInvalidArgument, "leave() before join()");
    Seat& seat = c_.seats_.at(id_);
    if (out(seat)) return Status::ok();
    if (!seat.silenced) {
      const std::string wait = c_.membership_.leave_must_wait(id_, terms);
      if (!wait.empty()) return leave_must_wait(wait);
    }
    if (!seat.silenced) c_.apply(c_.membership_.leave(id_, now()));
    seat.left = true;  // also when the membership had removed it already
    return Status::ok();
  }

 private:
  // The caller holds c_.mu_ for these.
  TimePoint now() const { return c_.clock_.now(); }
  Status joined() const {
    return id_ == 0 ? error(StatusCode::kInvalidArgument, "not joined") : Status::ok();
  }
  static bool out(const Seat& seat) { return seat.evicted || seat.left; }
  // Whether this member's messages reach the coordinator: a silenced one (dead, frozen)
  // sends nothing.
  bool speaks() const { return id_ != 0 && !c_.seats_.at(id_).silenced; }
  static Status out_status(const Seat& seat) {
    if (seat.evicted)
      return error(StatusCode::kEvicted, "removed by the coordinator: " + seat.evicted_reason);
    if (seat.left) return error(StatusCode::kAborted, "this member left");
    return Status::ok();
  }

  MemoryCoordinator& c_;
  MemberId id_ = 0;  // guarded by c_.mu_
  std::thread teller_;        // set_view_listener()'s
  bool teller_stop_ = false;  // guarded by c_.mu_
};

MemoryCoordinator::MemoryCoordinator(membership::MembershipConfig config)
    : membership_(std::move(config)) {}

std::unique_ptr<ControlPlane> MemoryCoordinator::connect() {
  return std::make_unique<Plane>(*this);
}

void MemoryCoordinator::advance(Duration d) {
  std::lock_guard lock(mu_);
  clock_.advance(d);
  const TimePoint now = clock_.now();
  for (const auto& [id, seat] : seats_) {
    if (!seat.silenced && !seat.evicted && !seat.left) {
      membership_.heartbeat(id, seat.view.epoch, seat.step, now);
    }
  }
  apply(membership_.tick(now));
  apply(rounds_.tick(membership_.view(), now));
}

void MemoryCoordinator::silence(MemberId id) {
  std::lock_guard lock(mu_);
  if (auto it = seats_.find(id); it != seats_.end()) it->second.silenced = true;
}

void MemoryCoordinator::restart() {
  std::lock_guard lock(mu_);
  const TimePoint now = clock_.now();
  membership::MembershipConfig config = membership_.config();
  config.last_epoch = membership_.epoch();  // what the journal holds
  config.last_member_id = membership_.last_member_id();
  std::vector<std::pair<MemberId, membership::MemberLabels>> journaled;
  for (const auto& m : membership_.view().members) {
    journaled.emplace_back(m.id, membership_.find(m.id)->labels);
  }
  membership_ = membership::Membership(config);
  rounds_ = membership::FederatedRounds();  // not journaled: rounds open again
  membership_.restore(journaled, now);
  for (auto& [id, seat] : seats_) {
    if (seat.evicted || seat.left || seat.silenced) continue;
    const auto it = std::find_if(journaled.begin(), journaled.end(),
                                 [id = id](const auto& j) { return j.first == id; });
    if (it == journaled.end()) {
      seat.evicted = true;
      seat.evicted_reason = "unknown to the restarted coordinator";
      continue;
    }
    auto resumed = membership_.resume(id, it->second, now);
    if (resumed) apply(resumed->decisions);
  }
  cv_.notify_all();
}

View MemoryCoordinator::view() const {
  std::lock_guard lock(mu_);
  return membership_.view();
}

std::size_t MemoryCoordinator::member_count() const {
  std::lock_guard lock(mu_);
  return membership_.size();
}

void MemoryCoordinator::lose_round_done(MemberId id) {
  std::lock_guard lock(mu_);
  lost_round_done_.insert(id);
}

std::optional<membership::RoundDecision> MemoryCoordinator::round_decision(
    std::uint64_t round) const {
  std::lock_guard lock(mu_);
  const membership::RoundDecision* d = rounds_.decision(round);
  return d ? std::optional<membership::RoundDecision>(*d) : std::nullopt;
}

std::size_t MemoryCoordinator::round_ready_count(std::uint64_t round) const {
  std::lock_guard lock(mu_);
  return rounds_.ready_count(round);
}

int MemoryCoordinator::failure_reports() const {
  std::lock_guard lock(mu_);
  return failure_reports_;
}

int MemoryCoordinator::views_issued() const {
  std::lock_guard lock(mu_);
  return views_issued_;
}

void MemoryCoordinator::apply(const membership::Decisions& d) {
  for (const auto& removal : d.removed) {
    Seat& seat = seats_[removal.id];
    if (removal.reason == membership::RemovalReason::kLeft) {
      seat.left = true;
    } else {
      seat.evicted = true;
      seat.evicted_reason = std::string(membership::to_string(removal.reason));
    }
  }
  if (d.new_view) {
    ++views_issued_;
    for (const auto& m : d.new_view->members) seats_[m.id].view = *d.new_view;
  }
  // After the view, as the service sends them: rounds the new epoch decides again.
  if (d.new_view) apply(rounds_.on_view(*d.new_view, clock_.now()));
  if (d.go) {
    Go go{d.go->epoch, d.go->commit_through, d.go->joiners, d.go->state_source};
    for (MemberId id : d.go->recipients) seats_[id].go = go;
  }
  if (d.probe) {  // every member that can still talk answers at once, as a client does
    for (const auto& [id, seat] : seats_) {
      if (!seat.silenced && !seat.evicted && !seat.left)
        membership_.heartbeat(id, seat.view.epoch, seat.step, clock_.now());
    }
  }
  cv_.notify_all();
}

void MemoryCoordinator::apply(const membership::RoundOutput& out) {
  auto keep = [](Seat& seat, const membership::RoundDecision& d) {
    seat.rounds[d.round] = d;
    while (seat.rounds.size() > membership::kRoundsKept) seat.rounds.erase(seat.rounds.begin());
  };
  for (const auto& d : out.decided) {
    for (const auto& m : membership_.view().members) keep(seats_[m.id], d);
  }
  for (const auto& [id, d] : out.replies) keep(seats_[id], d);
  for (const auto& c : out.committed) {
    for (MemberId id : c.recipients) {
      auto& commits = seats_[id].commits;
      commits.insert({c.epoch, c.round});
      while (commits.size() > membership::kRoundsKept) commits.erase(commits.begin());
    }
  }
  cv_.notify_all();
}

template <typename Done>
bool MemoryCoordinator::wait(std::unique_lock<std::mutex>& lock, Deadline deadline, Done done) {
  if (deadline.at != TimePoint::max()) return cv_.wait_until(lock, deadline.at, done);
  cv_.wait(lock, done);  // no deadline: wait_until's arithmetic would overflow
  return true;
}

}  // namespace tributary::control_client
