#include "coordinator/status_report.h"

#include <algorithm>
#include <chrono>

namespace tributary::coordinator {
namespace {

using membership::ClusterStatus;
using membership::MemberId;
using membership::MemberRef;
using membership::MemberStatus;
using membership::PeerPhase;
using membership::PeerState;
using membership::ViewChange;

constexpr double kMaxStepSeconds = 1e6;  // longer intervals are clock jumps, not steps

std::int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// Adds `ref` to `list` while it has room; counts it in change.omitted otherwise.
void add_ref(ViewChange& change, std::vector<MemberRef>& list, MemberRef ref) {
  if (list.size() < membership::kMaxChangeMembers) {
    list.push_back(std::move(ref));
  } else {
    ++change.omitted;
  }
}

// Fills the mean step, compute and collective times over the member's step reports.
void fill_timings(MemberStatus& m, const std::deque<StatusTracker::StepSample>& samples) {
  double step = 0;
  double compute = 0;
  std::uint32_t n = 0;
  for (std::size_t i = 1; i < samples.size(); ++i) {
    const double dt =
        static_cast<double>(samples[i].arrival_unix_ns - samples[i - 1].arrival_unix_ns) * 1e-9;
    if (!(dt > 0) || dt > kMaxStepSeconds) continue;
    step += dt;
    compute += samples[i].compute_seconds;
    ++n;
  }
  if (n == 0) return;
  m.timed_steps = n;
  m.step_seconds = step / n;
  m.compute_seconds = compute / n;
  m.collective_seconds = std::max(0.0, m.step_seconds - m.compute_seconds);
}

// Compute time per member of the view in the latest step every one of them reported.
std::map<MemberId, double> latest_complete_step(const membership::View& view,
                                                const StatusTracker& tracker) {
  std::map<std::uint64_t, std::map<MemberId, double>> by_step;
  for (const auto& vm : view.members) {
    if (const auto* samples = tracker.samples(vm.id)) {
      for (const auto& s : *samples) by_step[s.step][vm.id] = s.compute_seconds;
    }
  }
  for (auto it = by_step.rbegin(); it != by_step.rend(); ++it) {
    if (it->second.size() == view.size()) return it->second;
  }
  return {};
}

std::string state_of(const PeerState& p, Duration age, Duration suspect_after) {
  switch (p.phase) {
    case PeerPhase::kInView: return age > suspect_after ? "suspect" : "in_view";
    case PeerPhase::kPending: return "pending";
    case PeerPhase::kWaiting: return "waiting";
    case PeerPhase::kResuming: return "resuming";
  }
  return "unknown";
}

std::string phase_of(const membership::Membership& m) {
  const auto& peers = m.peers();
  if (std::any_of(peers.begin(), peers.end(),
                  [](const auto& e) { return e.second.phase == PeerPhase::kResuming; }))
    return "resuming";
  if (m.forming()) return "forming";
  if (m.view().empty()) return "empty";
  return m.started_epoch() == m.epoch() ? "steady" : "changing";
}

// The peers of rank `rank` in a view of `n` members: all of them, or its ring neighbours.
std::vector<std::uint32_t> link_peers(std::uint32_t rank, std::size_t n) {
  std::vector<std::uint32_t> peers;
  if (n <= membership::kMaxFullLinkMembers) {
    for (std::uint32_t r = 0; r < n; ++r) {
      if (r != rank) peers.push_back(r);
    }
    return peers;
  }
  const auto size = static_cast<std::uint32_t>(n);
  peers.push_back((rank + size - 1) % size);
  if ((rank + 1) % size != peers.front()) peers.push_back((rank + 1) % size);
  return peers;
}

MemberStatus member_status(const PeerState& p, const StatusContext& ctx,
                           const StatusTracker& tracker) {
  const Duration age = ctx.now > p.last_heartbeat ? ctx.now - p.last_heartbeat : Duration::zero();
  MemberStatus m;
  m.id = p.id;
  m.name = p.labels.name;
  m.host = p.labels.host;
  m.zone = p.labels.zone;
  m.data_address = p.labels.data_address;
  m.state = state_of(p, age, ctx.suspect_after);
  m.known_epoch = p.known_epoch;
  m.step = p.step;
  m.heartbeat_age_ms = to_ms(age);
  m.straggling_steps = static_cast<std::uint32_t>(membership::straggling_steps(p.lag_history));
  if (const auto* samples = tracker.samples(p.id)) fill_timings(m, *samples);
  return m;
}

}  // namespace

void StatusTracker::step_reported(MemberId id, std::uint64_t step, double compute_seconds,
                                  std::int64_t arrival_unix_ns) {
  auto& samples = samples_[id];
  samples.push_back({step, compute_seconds, arrival_unix_ns});
  if (samples.size() > kTimedSteps) samples.pop_front();
}

const std::deque<StatusTracker::StepSample>* StatusTracker::samples(MemberId id) const {
  auto it = samples_.find(id);
  return it == samples_.end() ? nullptr : &it->second;
}

void StatusTracker::links_reported(MemberId id, membership::Epoch epoch,
                                   std::vector<membership::LinkPath> links) {
  ReportedLinks& r = links_[id];
  if (epoch < r.epoch) return;  // a late heartbeat of an earlier view
  r.epoch = epoch;
  r.links = std::move(links);
  for (auto& l : r.links) l.source = "agent";
}

const StatusTracker::ReportedLinks* StatusTracker::links(MemberId id) const {
  auto it = links_.find(id);
  return it == links_.end() ? nullptr : &it->second;
}

std::optional<ViewChange> StatusTracker::record(const membership::Decisions& decisions,
                                                const membership::Membership& membership,
                                                std::int64_t unix_ms) {
  for (const auto& r : decisions.removed) {
    samples_.erase(r.id);
    links_.erase(r.id);
  }
  if (!decisions.new_view) return std::nullopt;
  const membership::View& view = *decisions.new_view;
  ViewChange change;
  change.epoch = view.epoch;
  change.cause = std::string(membership::to_string(decisions.cause));
  change.unix_ms = unix_ms;
  change.size = static_cast<std::uint32_t>(view.size());
  std::map<MemberId, std::string> names;
  for (const auto& vm : view.members) {
    const PeerState* p = membership.find(vm.id);
    names[vm.id] = p ? p->labels.name : std::string();
    if (!last_view_.contains(vm.id)) add_ref(change, change.joined, {vm.id, names[vm.id], {}, {}});
  }
  for (const auto& [id, name] : last_view_) {
    if (names.contains(id)) continue;
    MemberRef ref{id, name, "unknown", {}};
    for (const auto& r : decisions.removed) {
      if (r.id != id) continue;
      ref.reason = std::string(membership::to_string(r.reason));
      ref.noticed_by = r.reporter_name;
    }
    add_ref(change, change.removed, std::move(ref));
  }
  last_view_ = std::move(names);
  remember(change);
  return change;
}

void StatusTracker::restore(const std::vector<membership::JournalEntry>& views) {
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto& e = views[i];
    ViewChange change;
    change.epoch = e.epoch;
    change.cause = e.cause.empty() ? "unknown" : e.cause;
    change.unix_ms = e.unix_ms;
    change.size = static_cast<std::uint32_t>(e.members.size());
    change.from_journal = true;
    // Joiners are known by comparison with the view before; the oldest journaled view
    // has none to compare with unless it was the initial one.
    std::map<MemberId, std::string> names;
    for (const auto& m : e.members) {
      names[m.id] = m.labels.name;
      const bool known_before =
          i > 0 && std::any_of(views[i - 1].members.begin(), views[i - 1].members.end(),
                               [&](const auto& o) { return o.id == m.id; });
      if (!known_before && (i > 0 || e.cause == "initial"))
        add_ref(change, change.joined, {m.id, m.labels.name, {}, {}});
    }
    for (const auto& r : e.removed)
      add_ref(change, change.removed, {r.id, r.name, r.reason, r.noticed_by});
    last_view_ = std::move(names);
    remember(std::move(change));
  }
}

void StatusTracker::remember(ViewChange change) {
  history_.push_back(std::move(change));
  if (history_.size() > membership::kMaxStatusHistory) history_.pop_front();
}

ClusterStatus build_status(const membership::Membership& membership, const StatusTracker& tracker,
                           const StatusContext& ctx) {
  const auto& config = membership.config();
  const membership::View& view = membership.view();
  ClusterStatus s;
  s.instance_id = ctx.instance_id;
  s.unix_ms = ctx.unix_ms;
  s.uptime_ms = to_ms(ctx.now - ctx.started_at);
  s.phase = phase_of(membership);
  s.epoch = membership.epoch();
  s.world_size = static_cast<std::uint32_t>(config.initial_world_size);
  s.heartbeat_interval_ms = to_ms(ctx.heartbeat_interval);
  s.heartbeat_timeout_ms = to_ms(membership.heartbeat_timeout(ctx.now));
  s.suspect_after_ms = to_ms(ctx.suspect_after);
  s.straggler_k = config.straggler.k;
  s.straggler_m = static_cast<std::uint32_t>(config.straggler.m);
  s.straggler_window = static_cast<std::uint32_t>(config.straggler.w);
  s.links_scope = view.size() <= membership::kMaxFullLinkMembers ? "all_peers" : "ring_neighbours";
  s.handshakes_open = static_cast<std::uint32_t>(ctx.handshakes_open);
  s.history.assign(tracker.history().begin(), tracker.history().end());

  const auto latest = latest_complete_step(view, tracker);
  std::vector<double> times;
  for (const auto& [id, t] : latest) times.push_back(t);
  const double median = membership::lower_median(times);
  auto add = [&](MemberStatus m) {
    if (s.members.size() < membership::kMaxStatusMembers) {
      s.members.push_back(std::move(m));
    } else {
      ++s.members_omitted;
    }
  };
  for (const auto& vm : view.members) {
    const PeerState* p = membership.find(vm.id);
    if (p == nullptr || p->phase != PeerPhase::kInView) continue;
    MemberStatus m = member_status(*p, ctx, tracker);
    m.in_view = true;
    m.rank = vm.rank;
    if (auto it = latest.find(vm.id); it != latest.end() && median > 0)
      m.straggler_score = it->second / median;
    // What the member reported for this view; inferred from the view until it has.
    const StatusTracker::ReportedLinks* reported = tracker.links(vm.id);
    if (reported != nullptr && reported->epoch != view.epoch) reported = nullptr;
    for (std::uint32_t r : link_peers(vm.rank, view.size())) {
      const MemberId peer = view.members[r].id;
      const membership::LinkPath* own = nullptr;
      if (reported != nullptr) {
        for (const auto& l : reported->links) {
          if (l.peer == peer) own = &l;
        }
      }
      if (own != nullptr) {
        m.links.push_back(*own);
      } else {
        m.links.push_back({peer, "tcp", view.members[r].data_address, "view", {}, 0, {}});
      }
    }
    add(std::move(m));
  }
  for (const auto& [id, p] : membership.peers()) {
    if (p.phase != PeerPhase::kInView) add(member_status(p, ctx, tracker));
  }
  return s;
}

}  // namespace tributary::coordinator
