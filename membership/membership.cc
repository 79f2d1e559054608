#include "membership/membership.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/check.h"

namespace tributary::membership {

std::string_view to_string(RemovalReason reason) {
  switch (reason) {
    case RemovalReason::kLeft: return "left";
    case RemovalReason::kHeartbeatTimeout: return "heartbeat_timeout";
    case RemovalReason::kMalformed: return "malformed";
  }
  return "unknown";
}

Membership::Membership(MembershipConfig config)
    : config_(std::move(config)), last_epoch_(config_.last_epoch), last_id_(config_.last_member_id) {
  TRIB_CHECK(config_.initial_world_size >= 1) << "initial_world_size must be validated by the caller";
  TRIB_CHECK(config_.heartbeat_timeout > Duration::zero()) << "heartbeat_timeout must be positive";
}

Result<JoinDecision> Membership::join(MemberLabels labels, TimePoint now) {
  if (peers_.size() >= config_.max_members) {
    return error(StatusCode::kUnavailable,
                 "membership full: " + std::to_string(peers_.size()) + " members (max_members)");
  }
  PeerState peer;
  peer.id = ++last_id_;
  peer.labels = std::move(labels);
  peer.joined_at = now;
  peer.last_heartbeat = now;
  const MemberId id = peer.id;
  peers_.emplace(id, std::move(peer));

  JoinDecision out;
  out.id = id;
  out.decisions.new_view = maybe_issue_view();
  return out;
}

Decisions Membership::leave(MemberId id, TimePoint now) { return remove(id, RemovalReason::kLeft, now); }

Decisions Membership::remove(MemberId id, RemovalReason reason, TimePoint /*now*/) {
  if (!peers_.contains(id)) return {};
  return remove_all({{id, reason}});
}

HeartbeatDecision Membership::heartbeat(MemberId id, Epoch known_epoch, std::uint64_t step, TimePoint now) {
  HeartbeatDecision out;
  out.current_epoch = view_.epoch;
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

Decisions Membership::tick(TimePoint now) {
  std::vector<std::pair<MemberId, RemovalReason>> gone;
  for (const auto& [id, peer] : peers_) {
    if (now - peer.last_heartbeat > config_.heartbeat_timeout) {
      gone.emplace_back(id, RemovalReason::kHeartbeatTimeout);
    }
  }
  if (gone.empty()) return {};
  return remove_all(gone);
}

TimePoint Membership::next_expiry() const {
  TimePoint next = TimePoint::max();
  for (const auto& [id, peer] : peers_) {
    // tick() removes when strictly more than the timeout has passed; one tick later.
    next = std::min(next, peer.last_heartbeat + config_.heartbeat_timeout + Duration{1});
  }
  return next;
}

const PeerState* Membership::find(MemberId id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : &it->second;
}

Decisions Membership::remove_all(const std::vector<std::pair<MemberId, RemovalReason>>& gone) {
  Decisions out;
  for (const auto& [id, reason] : gone) {
    auto it = peers_.find(id);
    TRIB_CHECK(it != peers_.end()) << "removing unknown member " << id;
    out.removed.push_back({id, reason, it->second.labels.name});
    peers_.erase(it);
  }
  out.new_view = maybe_issue_view();
  return out;
}

std::optional<View> Membership::maybe_issue_view() {
  if (!first_view_issued_ && peers_.size() < config_.initial_world_size) return std::nullopt;
  first_view_issued_ = true;
  view_ = build_view(++last_epoch_);
  for (auto& [id, peer] : peers_) peer.phase = PeerPhase::kInView;
  return view_;
}

View Membership::build_view(Epoch epoch) const {
  std::vector<const PeerState*> ring;
  ring.reserve(peers_.size());
  for (const auto& [id, peer] : peers_) ring.push_back(&peer);
  // Ids grow with join order, so the id is the join-order tie-break.
  std::sort(ring.begin(), ring.end(), [](const PeerState* a, const PeerState* b) {
    return std::tie(a->labels.zone, a->labels.host, a->id) < std::tie(b->labels.zone, b->labels.host, b->id);
  });
  View view;
  view.epoch = epoch;
  view.members.reserve(ring.size());
  view.ring.reserve(ring.size());
  for (std::size_t rank = 0; rank < ring.size(); ++rank) {
    const PeerState& p = *ring[rank];
    view.members.push_back({p.id, static_cast<std::uint32_t>(rank), p.labels.data_address, p.labels.host,
                            p.labels.zone, p.labels.capabilities});
    view.ring.push_back(static_cast<std::uint32_t>(rank));
  }
  return view;
}

}  // namespace tributary::membership
