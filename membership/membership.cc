#include "membership/membership.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>
#include <utility>

#include "core/check.h"

namespace tributary::membership {
namespace {

// t + d without overflowing past TimePoint::max().
TimePoint add(TimePoint t, Duration d) {
  return t >= TimePoint::max() - d ? TimePoint::max() : t + d;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

}  // namespace

std::string_view to_string(RemovalReason reason) {
  switch (reason) {
    case RemovalReason::kLeft: return "left";
    case RemovalReason::kHeartbeatTimeout: return "heartbeat_timeout";
    case RemovalReason::kMalformed: return "malformed";
    case RemovalReason::kFailureConfirmed: return "failure_confirmed";
    case RemovalReason::kReadyTimeout: return "ready_timeout";
    case RemovalReason::kBoundaryTimeout: return "boundary_timeout";
    case RemovalReason::kStraggler: return "straggler";
    case RemovalReason::kResumeTimeout: return "resume_timeout";
  }
  return "unknown";
}

std::string_view to_string(ViewCause cause) {
  switch (cause) {
    case ViewCause::kInitial: return "initial";
    case ViewCause::kJoin: return "join";
    case ViewCause::kLeave: return "leave";
    case ViewCause::kFailure: return "failure";
    case ViewCause::kBoundary: return "boundary";
    case ViewCause::kStraggler: return "straggler";
    case ViewCause::kLinkRebuild: return "link_rebuild";
    case ViewCause::kResume: return "resume";
  }
  return "unknown";
}

Membership::Membership(MembershipConfig config)
    : config_(std::move(config)),
      last_epoch_(config_.last_epoch),
      last_id_(config_.last_member_id) {
  TRIB_CHECK(config_.initial_world_size >= 1)
      << "initial_world_size must be validated by the caller";
  TRIB_CHECK(config_.heartbeat_timeout > Duration::zero()) << "heartbeat_timeout must be positive";
  TRIB_CHECK(validate(config_.straggler).is_ok()) << validate(config_.straggler).message();
  // A restarted coordinator that issued views before never gathers an initial world again.
  first_view_issued_ = last_epoch_ > 0;
  started_epoch_ = 0;
}

bool Membership::in_view(MemberId id) const {
  auto it = peers_.find(id);
  return it != peers_.end() && it->second.phase == PeerPhase::kInView;
}

bool Membership::ready_round_waiting() const {
  if (go_sent_) return false;
  return std::any_of(view_.members.begin(), view_.members.end(), [this](const ViewMember& m) {
    const PeerState& p = peers_.at(m.id);
    return p.ready && p.ready->epoch == view_.epoch;
  });
}

bool Membership::joiners_pending() const { return pending_ > 0; }

Result<JoinDecision> Membership::join(MemberLabels labels, TimePoint now) {
  if (peers_.size() >= config_.max_members) {
    return error(StatusCode::kUnavailable,
                 "membership full: " + std::to_string(peers_.size()) + " members (max_members)");
  }
  std::erase_if(cooldown_until_, [now](const auto& e) { return e.second <= now; });
  if (auto it = cooldown_until_.find(labels.name); it != cooldown_until_.end()) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(it->second - now).count();
    return error(StatusCode::kEvicted,
                 "'" + labels.name +
                     "' was evicted as a straggler; it may rejoin after the cool-down, in " +
                     std::to_string(ms) + " ms");
  }
  PeerState peer;
  peer.id = ++last_id_;
  peer.labels = std::move(labels);
  peer.joined_at = now;
  peer.last_heartbeat = now;
  const bool resuming = resume_deadline_ != TimePoint::max();
  peer.phase = first_view_issued_ || resuming ? PeerPhase::kPending : PeerPhase::kWaiting;
  pending_ += peer.phase == PeerPhase::kPending;
  const MemberId id = peer.id;
  peers_.emplace(id, std::move(peer));

  JoinDecision out;
  out.id = id;
  if (!first_view_issued_) {
    out.decisions.new_view = maybe_issue_view(now, false);
    out.decisions.cause = ViewCause::kInitial;
  } else if (!resuming && view_.empty()) {
    // Nobody to wait for at a step boundary: admit at once.
    out.decisions.new_view = maybe_issue_view(now, true);
    out.decisions.cause = ViewCause::kJoin;
  }
  return out;
}

void Membership::restore(std::vector<std::pair<MemberId, MemberLabels>> members, TimePoint now) {
  started_members_.clear();
  for (auto& [id, labels] : members) {
    PeerState peer;
    peer.id = id;
    peer.labels = std::move(labels);
    peer.phase = PeerPhase::kResuming;
    peer.joined_at = now;
    peer.last_heartbeat = now;
    last_id_ = std::max(last_id_, id);
    started_members_.push_back(id);
    if (auto old = peers_.find(id); old != peers_.end())
      pending_ -= old->second.phase == PeerPhase::kPending;
    peers_[id] = std::move(peer);
  }
  std::sort(started_members_.begin(), started_members_.end());
  started_epoch_ = last_epoch_;
  first_view_issued_ = first_view_issued_ || !members.empty();
  resume_deadline_ = members.empty() ? TimePoint::max() : add(now, config_.resume_timeout);
}

Result<JoinDecision> Membership::resume(MemberId id, MemberLabels labels, TimePoint now) {
  auto it = peers_.find(id);
  if (it == peers_.end()) {
    return error(StatusCode::kInvalidArgument,
                 "member " + std::to_string(id) + " is not a member (removed, or never journaled)");
  }
  PeerState& peer = it->second;
  if (peer.labels.name != labels.name) {
    return error(StatusCode::kInvalidArgument, "member " + std::to_string(id) + " is '" +
                                                   peer.labels.name + "', not '" + labels.name +
                                                   "'");
  }
  peer.last_heartbeat = std::max(peer.last_heartbeat, now);
  JoinDecision out;
  out.id = id;
  if (peer.phase != PeerPhase::kResuming) return out;  // a reconnect: known again, nothing changes
  peer.labels = std::move(labels);
  peer.phase = PeerPhase::kWaiting;
  const bool all_back = std::none_of(peers_.begin(), peers_.end(), [](const auto& e) {
    return e.second.phase == PeerPhase::kResuming;
  });
  if (all_back) out.decisions = finish_resume(now);
  return out;
}

Decisions Membership::finish_resume(TimePoint now) {
  Gone gone;
  for (const auto& [id, peer] : peers_) {
    if (peer.phase == PeerPhase::kResuming) gone.emplace_back(id, RemovalReason::kResumeTimeout);
  }
  resume_deadline_ = TimePoint::max();
  Decisions out;
  for (const auto& [id, reason] : gone) {
    auto it = peers_.find(id);
    out.removed.push_back({id, reason, it->second.labels.name});
    pending_ -= it->second.phase == PeerPhase::kPending;
    peers_.erase(it);
  }
  out.new_view = maybe_issue_view(now, false);
  out.cause = ViewCause::kResume;
  return out;
}

Decisions Membership::leave(MemberId id, TimePoint now) {
  if (!peers_.contains(id)) return {};
  return remove_all({{id, RemovalReason::kLeft}}, ViewCause::kLeave, now);
}

Decisions Membership::remove(MemberId id, RemovalReason reason, TimePoint now) {
  if (!peers_.contains(id)) return {};
  return remove_all({{id, reason}},
                    reason == RemovalReason::kLeft ? ViewCause::kLeave : ViewCause::kFailure, now);
}

HeartbeatDecision Membership::heartbeat(MemberId id, Epoch known_epoch, std::uint64_t step,
                                        TimePoint now) {
  HeartbeatDecision out;
  out.current_epoch = view_.epoch;
  out.joiners_pending = joiners_pending();
  auto it = peers_.find(id);
  if (it == peers_.end()) return out;
  PeerState& peer = it->second;
  out.known = true;
  // A heartbeat delivered late must not move last_heartbeat backwards.
  peer.last_heartbeat = std::max(peer.last_heartbeat, now);
  peer.known_epoch = std::max(peer.known_epoch, known_epoch);
  peer.step = std::max(peer.step, step);
  out.resend_view = peer.phase == PeerPhase::kInView && known_epoch < view_.epoch;
  return out;
}

Decisions Membership::ready(MemberId id, const ReadyReport& report, TimePoint /*now*/) {
  if (!in_view(id) || report.epoch != view_.epoch) return {};
  Decisions out;
  if (go_sent_) {
    // A repeated Ready (its Go was lost or is in flight): answer it alone.
    if (last_go_ && last_go_->epoch == view_.epoch) {
      out.go = *last_go_;
      out.go->recipients = {id};
    }
    return out;
  }
  PeerState& peer = peers_.at(id);
  ready_ += !peer.ready || peer.ready->epoch != view_.epoch;
  peer.ready = report;
  out.go = maybe_go();
  return out;
}

std::optional<GoDecision> Membership::maybe_go() {
  std::vector<ReadyReport> survivors;
  std::vector<ReadyReport> all;
  // Most Readies leave others missing: say so without looking at every member. (A count
  // can only be too high, for a member removed without a new view: then the scan below
  // decides, as before.)
  if (ready_ < view_.size()) return std::nullopt;
  GoDecision go;
  go.epoch = view_.epoch;
  for (const auto& m : view_.members) {
    const PeerState& p = peers_.at(m.id);
    if (!p.ready || p.ready->epoch != view_.epoch) return std::nullopt;
    all.push_back(*p.ready);
    const bool was_started =
        std::binary_search(started_members_.begin(), started_members_.end(), m.id);
    if (was_started) {
      survivors.push_back(*p.ready);
      if (go.state_source == 0) go.state_source = m.id;  // members are by rank
    } else {
      go.joiners.push_back(m.id);
    }
  }
  // Nobody survived from a started view: nobody has state to give (a fresh start).
  if (go.state_source == 0) go.joiners.clear();
  go.commit_through =
      commit_through(survivors.empty() ? std::span<const ReadyReport>(all) : survivors);
  for (const auto& m : view_.members) go.recipients.push_back(m.id);
  go_sent_ = true;
  started_epoch_ = view_.epoch;
  started_members_.clear();
  for (const auto& m : view_.members) started_members_.push_back(m.id);
  std::sort(started_members_.begin(), started_members_.end());
  last_go_ = go;
  return go;
}

Decisions Membership::boundary(MemberId id, Epoch epoch, bool leaving, TimePoint now) {
  if (!in_view(id) || epoch != view_.epoch) return {};
  PeerState& peer = peers_.at(id);
  peer.boundary_epoch = epoch;
  peer.leaving = leaving;
  if (boundary_deadline_ == TimePoint::max())
    boundary_deadline_ = add(now, config_.boundary_timeout);
  for (const auto& m : view_.members) {
    if (peers_.at(m.id).boundary_epoch != epoch) return {};
  }
  return finish_boundary(now, {});
}

Decisions Membership::finish_boundary(TimePoint now, const Gone& silent) {
  Gone gone = silent;
  for (const auto& m : view_.members) {
    const PeerState& p = peers_.at(m.id);
    const bool already =
        std::any_of(gone.begin(), gone.end(), [&](const auto& g) { return g.first == m.id; });
    if (!already && p.boundary_epoch == view_.epoch && p.leaving)
      gone.emplace_back(m.id, RemovalReason::kLeft);
  }
  return remove_all(gone, ViewCause::kBoundary, now, /*force=*/true, /*admit_joiners=*/true);
}

Decisions Membership::failure_report(MemberId reporter, Epoch epoch, MemberId suspect,
                                     TimePoint now) {
  if (!in_view(reporter) || epoch != view_.epoch) return {};
  suspicions_.push_back({reporter, suspect, epoch, now});
  return check_suspicions(now);
}

Decisions Membership::check_suspicions(TimePoint now) {
  std::erase_if(suspicions_, [this](const Suspicion& s) {
    return s.epoch != view_.epoch || !in_view(s.reporter);
  });
  if (suspicions_.empty()) return {};
  auto silent = [&](MemberId id) {
    return in_view(id) && now - peers_.at(id).last_heartbeat > config_.confirm_silence;
  };
  std::set<MemberId> confirmed;
  for (const auto& s : suspicions_) {
    if (s.suspect != 0) {
      if (silent(s.suspect)) confirmed.insert(s.suspect);
    } else {
      for (const auto& m : view_.members) {
        if (silent(m.id)) confirmed.insert(m.id);
      }
    }
  }
  if (!confirmed.empty()) {
    Gone gone;
    for (MemberId id : confirmed) gone.emplace_back(id, RemovalReason::kFailureConfirmed);
    return remove_all(gone, ViewCause::kFailure, now);
  }
  for (const auto& s : suspicions_) {
    if (now - s.reported_at > config_.heartbeat_timeout) {
      // The suspect keeps heartbeating and the reporter can still talk: the epoch's links
      // are broken, not a member. A fresh epoch with the same members rebuilds them.
      const std::string line =
          "failure report by member " + std::to_string(s.reporter) + " about " +
          (s.suspect ? "member " + std::to_string(s.suspect) : std::string("an unknown peer")) +
          " in epoch " + std::to_string(s.epoch) +
          " not confirmed (suspect alive): new view with the same members to rebuild the links";
      Decisions out = remove_all({}, ViewCause::kLinkRebuild, now, /*force=*/true);
      out.log.push_back(line);
      return out;
    }
  }
  return {};
}

Decisions Membership::step_timing(MemberId id, std::uint64_t step, double compute_seconds,
                                  TimePoint now) {
  if (!config_.straggler.enabled || !in_view(id)) return {};
  step_times_[step][id] = compute_seconds;
  // Bounded: steps that never complete (a member left mid-step) age out.
  while (step_times_.size() > 2 * config_.straggler.w + 8) step_times_.erase(step_times_.begin());
  auto it = step_times_.find(step);
  if (it == step_times_.end()) return {};
  for (const auto& m : view_.members) {
    if (!it->second.contains(m.id)) return {};
  }
  return evaluate_step(step, now);
}

Decisions Membership::evaluate_step(std::uint64_t step, TimePoint now) {
  const StragglerConfig& sc = config_.straggler;
  std::map<MemberId, double> times;
  for (const auto& [id, t] : step_times_.at(step)) {
    if (in_view(id)) times[id] = t;
  }
  step_times_.erase(step);
  double median = 0;
  Decisions out;
  std::vector<std::pair<std::size_t, MemberId>> candidates;  // (straggling steps, id)
  for (const auto& v : judge_step(sc, times, &median)) {
    PeerState& p = peers_.at(v.id);
    record_verdict(sc, p.lag_history, v.straggler);
    if (!v.straggler) continue;
    const std::size_t n = straggling_steps(p.lag_history);
    out.log.push_back(
        "straggler: member " + std::to_string(v.id) + " ('" + p.labels.name + "') computed step " +
        std::to_string(step) + " in " + seconds_text(v.seconds) + " > " + std::to_string(sc.k) +
        " x median " + seconds_text(median) + " (" + std::to_string(n) + " of its last " +
        std::to_string(p.lag_history.size()) + " steps, evicts at " + std::to_string(sc.m) + ")");
    if (should_evict(sc, p.lag_history)) candidates.emplace_back(n, v.id);
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::size_t size = view_.size();
  Gone gone;
  for (const auto& [n, id] : candidates) {
    PeerState& p = peers_.at(id);
    if (size <= sc.min_world_size) {
      out.log.push_back("straggler: member " + std::to_string(id) + " ('" + p.labels.name +
                        "') kept: evicting it would leave " + std::to_string(size - 1) +
                        " members, below min_world_size " + std::to_string(sc.min_world_size));
      continue;
    }
    --size;
    gone.emplace_back(id, RemovalReason::kStraggler);
    cooldown_until_[p.labels.name] = add(now, sc.cooldown);
    out.log.push_back(
        "straggler: evicting member " + std::to_string(id) + " ('" + p.labels.name +
        "'): straggled in " + std::to_string(n) + " of its last " +
        std::to_string(p.lag_history.size()) + " steps; it may rejoin after " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(sc.cooldown).count()) +
        " ms");
  }
  if (gone.empty()) return out;
  Decisions removal = remove_all(gone, ViewCause::kStraggler, now);
  removal.log.insert(removal.log.begin(), out.log.begin(), out.log.end());
  return removal;
}

Decisions Membership::tick(TimePoint now) {
  if (resume_deadline_ != TimePoint::max() && now > resume_deadline_) return finish_resume(now);
  Gone gone;
  auto add_gone = [&](MemberId id, RemovalReason reason) {
    if (std::none_of(gone.begin(), gone.end(), [id](const auto& g) { return g.first == id; }))
      gone.emplace_back(id, reason);
  };
  for (const auto& [id, peer] : peers_) {
    if (peer.phase != PeerPhase::kResuming &&
        now - peer.last_heartbeat > config_.heartbeat_timeout) {
      add_gone(id, RemovalReason::kHeartbeatTimeout);
    }
  }
  if (ready_round_waiting() && now > ready_deadline_) {
    for (const auto& m : view_.members) {
      const PeerState& p = peers_.at(m.id);
      if (!p.ready || p.ready->epoch != view_.epoch) add_gone(m.id, RemovalReason::kReadyTimeout);
    }
  }
  if (now > boundary_deadline_) {
    for (const auto& m : view_.members) {
      if (peers_.at(m.id).boundary_epoch != view_.epoch)
        add_gone(m.id, RemovalReason::kBoundaryTimeout);
    }
    return finish_boundary(now, gone);
  }
  if (!gone.empty()) return remove_all(gone, ViewCause::kFailure, now);
  return check_suspicions(now);
}

TimePoint Membership::next_expiry() const {
  TimePoint next = TimePoint::max();
  for (const auto& [id, peer] : peers_) {
    if (peer.phase == PeerPhase::kResuming) continue;
    // tick() removes when strictly more than the timeout has passed; one tick later.
    next = std::min(next, add(peer.last_heartbeat, config_.heartbeat_timeout + Duration{1}));
  }
  if (ready_round_waiting()) next = std::min(next, add(ready_deadline_, Duration{1}));
  next = std::min(next, add(boundary_deadline_, Duration{1}));
  next = std::min(next, add(resume_deadline_, Duration{1}));
  for (const auto& s : suspicions_) {
    if (s.epoch != view_.epoch) continue;
    next = std::min(next, add(s.reported_at, config_.heartbeat_timeout + Duration{1}));
    for (const auto& m : view_.members) {
      if (s.suspect != 0 && s.suspect != m.id) continue;
      next = std::min(next,
                      add(peers_.at(m.id).last_heartbeat, config_.confirm_silence + Duration{1}));
    }
  }
  return next;
}

const PeerState* Membership::find(MemberId id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : &it->second;
}

Decisions Membership::remove_all(const Gone& gone, ViewCause cause, TimePoint now, bool force,
                                 bool admit_joiners) {
  Decisions out;
  bool view_changed = force;
  for (const auto& [id, reason] : gone) {
    auto it = peers_.find(id);
    TRIB_CHECK(it != peers_.end()) << "removing unknown member " << id;
    view_changed = view_changed || it->second.phase == PeerPhase::kInView;
    out.removed.push_back({id, reason, it->second.labels.name});
    pending_ -= it->second.phase == PeerPhase::kPending;
    peers_.erase(it);
  }
  if (resume_deadline_ != TimePoint::max()) return out;  // the resume view comes later
  if (!first_view_issued_) {
    out.new_view = maybe_issue_view(now, false);  // only if the initial world is (still) complete
    out.cause = ViewCause::kInitial;
  } else if (view_changed) {
    const bool nobody_left = std::none_of(peers_.begin(), peers_.end(), [](const auto& e) {
      return e.second.phase == PeerPhase::kInView;
    });
    out.new_view = maybe_issue_view(now, admit_joiners || nobody_left);
    out.cause = cause;
  }
  return out;
}

std::optional<View> Membership::maybe_issue_view(TimePoint now, bool admit_joiners) {
  if (!first_view_issued_) {
    const auto waiting = std::count_if(peers_.begin(), peers_.end(), [](const auto& e) {
      return e.second.phase == PeerPhase::kWaiting;
    });
    if (static_cast<std::size_t>(waiting) < config_.initial_world_size) return std::nullopt;
  }
  first_view_issued_ = true;
  for (auto& [id, peer] : peers_) {
    if (peer.phase == PeerPhase::kWaiting || (admit_joiners && peer.phase == PeerPhase::kPending)) {
      pending_ -= peer.phase == PeerPhase::kPending;
      peer.phase = PeerPhase::kInView;
    }
    peer.ready.reset();
    peer.boundary_epoch = 0;
    peer.leaving = false;
  }
  ready_ = 0;
  view_ = build_view(++last_epoch_);
  boundary_deadline_ = TimePoint::max();
  suspicions_.clear();
  if (view_.empty()) {
    // Nobody to be Ready: the (empty) view is started at once.
    ready_deadline_ = TimePoint::max();
    go_sent_ = true;
    started_epoch_ = view_.epoch;
    started_members_.clear();
  } else {
    ready_deadline_ = add(now, config_.ready_timeout);
    go_sent_ = false;
  }
  return view_;
}

View Membership::build_view(Epoch epoch) const {
  std::vector<const PeerState*> ring;
  ring.reserve(peers_.size());
  for (const auto& [id, peer] : peers_) {
    if (peer.phase == PeerPhase::kInView) ring.push_back(&peer);
  }
  // Ids grow with join order, so the id is the join-order tie-break.
  std::sort(ring.begin(), ring.end(), [](const PeerState* a, const PeerState* b) {
    return std::tie(a->labels.zone, a->labels.host, a->id) <
           std::tie(b->labels.zone, b->labels.host, b->id);
  });
  View view;
  view.epoch = epoch;
  view.members.reserve(ring.size());
  view.ring.reserve(ring.size());
  for (std::size_t rank = 0; rank < ring.size(); ++rank) {
    const PeerState& p = *ring[rank];
    view.members.push_back({p.id, static_cast<std::uint32_t>(rank), p.labels.data_address,
                            p.labels.host, p.labels.zone, p.labels.capabilities});
    view.ring.push_back(static_cast<std::uint32_t>(rank));
  }
  return view;
}

}  // namespace tributary::membership
