#include "membership/membership.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "membership/saturating_time.h"

namespace tributary::membership {

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
      last_id_(config_.last_member_id),
      pace_(config_.heartbeat_interval, config_.max_heartbeat_rate, config_.heartbeat_timeout) {
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

// ready_ counts the view members whose Ready for view_ arrived (reset with every view).
bool Membership::ready_round_waiting() const { return !go_sent_ && ready_ > 0; }

void Membership::resized(TimePoint now) {
  pace_.resize(peers_.size(), now);
  oldest_heartbeat_ = std::min(oldest_heartbeat_, now);  // a newcomer's join is its heartbeat
}

bool Membership::joiners_pending() const { return pending_ > 0; }

namespace {

// The value of capability "name:value" in `labels`, or nullptr.
const std::string* shared_setting(const MemberLabels& labels, std::string_view name) {
  for (const std::string& c : labels.capabilities) {
    if (c.size() > name.size() && c.compare(0, name.size(), name) == 0 && c[name.size()] == ':')
      return &c;
  }
  return nullptr;
}

}  // namespace

Result<JoinDecision> Membership::join(MemberLabels labels, TimePoint now) {
  for (std::string_view name : kSharedSettings) {
    const std::string* mine = shared_setting(labels, name);
    if (mine == nullptr) continue;
    for (const auto& [id, peer] : peers_) {
      const std::string* theirs = shared_setting(peer.labels, name);
      if (theirs != nullptr && *theirs != *mine) {
        return error(StatusCode::kInvalidArgument,
                     "'" + labels.name + "' advertises " + *mine + ", member " +
                         std::to_string(id) + " ('" + peer.labels.name + "') " + *theirs +
                         ": every member needs the same setting (for tls: the same --tls and "
                         "the same kind of keys)");
      }
    }
  }
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
  resized(now);

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

std::vector<MemberId> Membership::with_state(const View& view) const {
  std::vector<MemberId> out;
  for (const auto& m : view.members) {
    if (std::binary_search(started_members_.begin(), started_members_.end(), m.id)) {
      out.push_back(m.id);
    }
  }
  return out;
}

void Membership::restore(std::vector<std::pair<MemberId, MemberLabels>> members, TimePoint now,
                         const std::optional<std::vector<MemberId>>& with_state) {
  std::vector<MemberId> holders = with_state.value_or(std::vector<MemberId>{});
  std::sort(holders.begin(), holders.end());  // thousands of members: no scan per member
  started_members_.clear();
  for (auto& [id, labels] : members) {
    PeerState peer;
    peer.id = id;
    peer.labels = std::move(labels);
    peer.phase = PeerPhase::kResuming;
    peer.joined_at = now;
    peer.last_heartbeat = now;
    last_id_ = std::max(last_id_, id);
    if (!with_state || std::binary_search(holders.begin(), holders.end(), id)) {
      started_members_.push_back(id);
    }
    if (auto old = peers_.find(id); old != peers_.end())
      pending_ -= old->second.phase == PeerPhase::kPending;
    peers_[id] = std::move(peer);
  }
  std::sort(started_members_.begin(), started_members_.end());
  resized(now);
  started_epoch_ = last_epoch_;
  first_view_issued_ = first_view_issued_ || !members.empty();
  resume_deadline_ =
      members.empty() ? TimePoint::max() : saturating_add(now, config_.resume_timeout);
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
  oldest_heartbeat_ = std::min(oldest_heartbeat_, now);
  JoinDecision out;
  out.id = id;
  if (peer.phase != PeerPhase::kResuming) {
    // A reconnect: known again, nothing changes, but what went to the old connection
    // may be lost: its next heartbeat behind the view gets the view at once.
    peer.view_sent_at.reset();
    return out;
  }
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
  for (const Departure& d : gone) {
    auto it = peers_.find(d.id);
    out.removed.push_back({d.id, d.reason, it->second.labels.name, 0, {}});
    pending_ -= it->second.phase == PeerPhase::kPending;
    peers_.erase(it);
  }
  resized(now);
  out.new_view = maybe_issue_view(now, false);
  out.cause = ViewCause::kResume;
  return out;
}

Decisions Membership::leave(MemberId id, TimePoint now) {
  if (!peers_.contains(id)) return {};
  return remove_all({{id, RemovalReason::kLeft}}, ViewCause::kLeave, now);
}

std::string Membership::leave_must_wait(MemberId id, const LeaveTerms& terms) const {
  if (!terms.holds_result || !peers_.contains(id)) return {};
  if (view_.epoch > terms.epoch) {
    return "view " + std::to_string(view_.epoch) + " was issued after view " +
           std::to_string(terms.epoch) +
           ", the last this member adopted: move to it first (a peer may need its result)";
  }
  for (const auto& s : suspicions_) {
    if (s.epoch == view_.epoch) {
      return "a failure in view " + std::to_string(view_.epoch) +
             " is being resolved: move to the view that resolves it first (a peer may need "
             "its result)";
    }
  }
  return {};
}

Decisions Membership::remove(MemberId id, RemovalReason reason, TimePoint now) {
  if (!peers_.contains(id)) return {};
  return remove_all({{id, reason}},
                    reason == RemovalReason::kLeft ? ViewCause::kLeave : ViewCause::kFailure, now);
}

HeartbeatDecision Membership::heartbeat(MemberId id, Epoch known_epoch, std::uint64_t step,
                                        TimePoint now, bool want_view) {
  HeartbeatDecision out;
  out.current_epoch = view_.epoch;
  out.joiners_pending = joiners_pending();
  auto it = peers_.find(id);
  if (it == peers_.end()) return out;
  PeerState& peer = it->second;
  out.known = true;
  // A heartbeat delivered late must not move last_heartbeat backwards.
  peer.last_heartbeat = std::max(peer.last_heartbeat, now);
  if (known_epoch > last_epoch_) {
    out.refused = "member " + std::to_string(id) + " claims to know epoch " +
                  std::to_string(known_epoch) + ", but the last epoch issued is " +
                  std::to_string(last_epoch_);
    return out;
  }
  peer.known_epoch = std::max(peer.known_epoch, known_epoch);
  peer.step = std::max(peer.step, step);
  out.resend_view = peer.phase == PeerPhase::kInView && known_epoch < view_.epoch &&
                    (want_view || !peer.view_sent_at ||
                     now - *peer.view_sent_at >= kViewResendAfter * heartbeat_interval());
  if (out.resend_view) peer.view_sent_at = now;
  return out;
}

Decisions Membership::tick(TimePoint now) {
  if (resume_deadline_ != TimePoint::max() && now > resume_deadline_) return finish_resume(now);
  Gone gone;
  auto add_gone = [&](MemberId id, RemovalReason reason) {
    if (std::none_of(gone.begin(), gone.end(), [id](const Departure& g) { return g.id == id; }))
      gone.emplace_back(id, reason);
  };
  const Duration timeout = heartbeat_timeout(now);
  if (now - oldest_heartbeat_ > timeout) {  // somebody may have expired: sweep
    TimePoint oldest = TimePoint::max();
    for (const auto& [id, peer] : peers_) {
      if (peer.phase == PeerPhase::kResuming) continue;
      if (now - peer.last_heartbeat > timeout) {
        add_gone(id, RemovalReason::kHeartbeatTimeout);
      } else {
        oldest = std::min(oldest, peer.last_heartbeat);
      }
    }
    oldest_heartbeat_ = oldest;
  }
  if (ready_round_waiting() && now > ready_deadline_) {
    for (const auto& m : view_.members) {
      const PeerState& p = peers_.at(m.id);
      if (!p.ready || p.ready->epoch != view_.epoch) add_gone(m.id, RemovalReason::kReadyTimeout);
    }
  }
  for (const Departure& d : silent_in_ready_round(now)) add_gone(d.id, d.reason);
  if (now > boundary_deadline_) {
    for (const auto& m : view_.members) {
      if (peers_.at(m.id).boundary_epoch != view_.epoch)
        add_gone(m.id, RemovalReason::kBoundaryTimeout);
    }
    return finish_boundary(now, gone);
  }
  if (!gone.empty()) return remove_all(gone, ViewCause::kFailure, now);
  if (now < next_suspicion_check_) return {};
  return check_suspicions(now);
}

// O(1): the sweep's bound, the round deadlines and the suspicions' next check, each
// computed when it last changed.
TimePoint Membership::next_expiry() const {
  TimePoint next = TimePoint::max();
  // tick() removes when strictly more than the timeout has passed; one tick later.
  if (oldest_heartbeat_ != TimePoint::max())
    next = saturating_add(oldest_heartbeat_, heartbeat_timeout(oldest_heartbeat_) + Duration{1});
  if (ready_round_waiting()) {  // a short round: its silent members are looked at one by one
    next = std::min(next, saturating_add(ready_deadline_, Duration{1}));
    const Duration silence = confirm_silence(oldest_heartbeat_);
    for (const auto& m : view_.members) {
      const PeerState& p = peers_.at(m.id);
      if (p.ready && p.ready->epoch == view_.epoch) continue;
      next = std::min(next, saturating_add(p.last_heartbeat, silence + Duration{1}));
    }
  }
  next = std::min(next, saturating_add(boundary_deadline_, Duration{1}));
  next = std::min(next, saturating_add(resume_deadline_, Duration{1}));
  return std::min(next, next_suspicion_check_);
}

const PeerState* Membership::find(MemberId id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : &it->second;
}

Decisions Membership::remove_all(const Gone& gone, ViewCause cause, TimePoint now, bool force,
                                 bool admit_joiners) {
  Decisions out;
  bool view_changed = force;
  bool all_left = true;
  for (const Departure& d : gone) {
    all_left = all_left && d.reason == RemovalReason::kLeft;
    auto it = peers_.find(d.id);
    TRIB_CHECK(it != peers_.end()) << "removing unknown member " << d.id;
    view_changed = view_changed || it->second.phase == PeerPhase::kInView;
    const PeerState* reporter = d.reported_by ? find(d.reported_by) : nullptr;
    out.removed.push_back({d.id, d.reason, it->second.labels.name, reporter ? d.reported_by : 0,
                           reporter ? reporter->labels.name : std::string()});
    pending_ -= it->second.phase == PeerPhase::kPending;
    peers_.erase(it);
  }
  resized(now);
  if (resume_deadline_ != TimePoint::max()) return out;  // the resume view comes later
  if (!first_view_issued_) {
    out.new_view = maybe_issue_view(now, false);  // only if the initial world is (still) complete
    out.cause = ViewCause::kInitial;
  } else if (view_changed) {
    const bool nobody_left = std::none_of(peers_.begin(), peers_.end(), [](const auto& e) {
      return e.second.phase == PeerPhase::kInView;
    });
    const bool reform = nobody_left && config_.reform_when_empty;
    const View before = view_;
    out.new_view = maybe_issue_view(now, admit_joiners || (nobody_left && !reform));
    out.cause = cause;
    if (out.new_view && all_left &&
        std::all_of(out.new_view->members.begin(), out.new_view->members.end(),
                    [&](const ViewMember& m) { return before.contains(m.id); })) {
      out.new_view->leaves_only = true;
      view_.leaves_only = true;
    }
    if (reform) out = reform_world(std::move(out), now);
  }
  return out;
}

Decisions Membership::reform_world(Decisions out, TimePoint now) {
  // The (empty) view just issued ends the old world; the joiners that waited for a step
  // boundary of it wait for the new world's size instead, as on a fresh start.
  first_view_issued_ = false;
  for (auto& [id, peer] : peers_) {
    if (peer.phase == PeerPhase::kPending) peer.phase = PeerPhase::kWaiting;
  }
  pending_ = 0;
  if (auto formed = maybe_issue_view(now, false)) {
    out.new_view = std::move(formed);
    out.cause = ViewCause::kInitial;
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
    peer.view_sent_at = now;  // the coordinator pushes the view to every member
  }
  ready_ = 0;
  view_ = build_view(++last_epoch_);
  boundary_deadline_ = TimePoint::max();
  suspicions_.clear();
  next_suspicion_check_ = TimePoint::max();
  if (view_.empty()) {
    // Nobody to be Ready: the (empty) view is started at once.
    ready_deadline_ = TimePoint::max();
    go_sent_ = true;
    started_epoch_ = view_.epoch;
    started_members_.clear();
  } else {
    ready_deadline_ = saturating_add(now, config_.ready_timeout);
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