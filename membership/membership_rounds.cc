// The rounds of the membership logic (membership.h): Ready and Go, step boundaries,
// failure suspicions, and the straggler policy's step timings.
#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "membership/membership.h"
#include "membership/saturating_time.h"

namespace tributary::membership {
namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

// "2", "1.5": the straggler factor k as configured, without trailing zeros.
std::string factor_text(double k) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", k);
  return buf;
}

// A step timing that completes its step but is not judged (see step_timing).
constexpr double kNotJudged = -1.0;

}  // namespace

Decisions Membership::ready(MemberId id, const ReadyReport& report, TimePoint /*now*/) {
  if (!in_view(id) || report.epoch != view_.epoch) return {};
  PeerState& peer = peers_.at(id);
  peer.known_epoch = std::max(peer.known_epoch, report.epoch);  // it adopted this view
  Decisions out;
  if (go_sent_) {
    // A repeated Ready (its Go was lost or is in flight): answer it alone.
    if (last_go_ && last_go_->epoch == view_.epoch) {
      out.go = *last_go_;
      out.go->recipients = {id};
    }
    return out;
  }
  ready_ += !peer.ready || peer.ready->epoch != view_.epoch;
  peer.ready = report;
  out.go = maybe_go(out);
  return out;
}

std::optional<GoDecision> Membership::maybe_go(Decisions& out) {
  std::vector<ReadyReport> survivors;
  std::vector<MemberId> survivor_ids;
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
      survivor_ids.push_back(m.id);
      if (go.state_source == 0) go.state_source = m.id;  // members are by rank
    } else {
      go.joiners.push_back(m.id);
    }
  }
  // Nobody survived from a started view: nobody has state to give (a fresh start).
  if (go.state_source == 0) go.joiners.clear();
  // What the survivors were told when their epoch started; unknown after a restart.
  const std::uint64_t known = last_go_ && last_go_->epoch == started_epoch_ && !survivors.empty()
                                  ? last_go_->commit_through
                                  : 0;
  const CommitDecision decision =
      survivors.empty() ? decide_commit(all) : decide_commit(survivors, known);
  go.commit_through = decision.commit_through;
  for (const auto& r : decision.refused) {
    const MemberId who = survivors.empty() ? view_.members[r.index].id : survivor_ids[r.index];
    out.refused.push_back("Ready of member " + std::to_string(who) + " for epoch " +
                          std::to_string(view_.epoch) +
                          " left out of the commit decision: " + r.why);
  }
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
    boundary_deadline_ = saturating_add(now, config_.boundary_timeout);
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
        std::any_of(gone.begin(), gone.end(), [&](const Departure& g) { return g.id == m.id; });
    if (!already && p.boundary_epoch == view_.epoch && p.leaving)
      gone.emplace_back(m.id, RemovalReason::kLeft);
  }
  return remove_all(gone, ViewCause::kBoundary, now, /*force=*/true, /*admit_joiners=*/true);
}

Decisions Membership::failure_report(MemberId reporter, Epoch epoch, MemberId suspect,
                                     TimePoint now) {
  if (!in_view(reporter) || epoch != view_.epoch) return {};
  if (suspect != 0 && (suspect == reporter || !view_.contains(suspect))) {
    Decisions out;
    out.refused.push_back("failure report by member " + std::to_string(reporter) +
                          " names member " + std::to_string(suspect) +
                          (suspect == reporter ? " (itself)" : ", not in view ") +
                          (suspect == reporter ? "" : std::to_string(epoch)));
    return out;
  }
  suspicions_.push_back({reporter, suspect, epoch, now});
  Decisions out = check_suspicions(now);
  // One probe answers every report that arrives within confirm_silence of it.
  if (!out.new_view && (!last_probe_ || now - *last_probe_ > config_.confirm_silence)) {
    last_probe_ = now;
    out.probe = true;
    next_suspicion_check_ =
        std::min(next_suspicion_check_, saturating_add(now, config_.confirm_silence + Duration{1}));
  }
  return out;
}

Decisions Membership::connection_closed(MemberId id, TimePoint now) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return {};
  it->second.connection_closed = now;
  return check_suspicions(now);
}

TimePoint Membership::confirmed_dead_at(const PeerState& p, TimePoint now) const {
  // Closed by its own kernel and silent since: no reason to wait for the silence.
  if (p.connection_closed && p.last_heartbeat <= *p.connection_closed) return *p.connection_closed;
  TimePoint at = saturating_add(p.last_heartbeat, confirm_silence(now) + Duration{1});
  if (last_probe_ && p.last_heartbeat < *last_probe_)
    at = std::min(at, saturating_add(*last_probe_, config_.confirm_silence + Duration{1}));
  return at;
}

// The earliest live report naming `suspect`, else the earliest naming nobody (whoever is
// silent): the member that noticed, for the status history.
MemberId Membership::first_reporter(MemberId suspect) const {
  MemberId anyone = 0;
  for (const auto& s : suspicions_) {  // in the order they arrived
    if (s.suspect == suspect) return s.reporter;
    if (s.suspect == 0 && anyone == 0) anyone = s.reporter;
  }
  return anyone;
}

Decisions Membership::check_suspicions(TimePoint now) {
  std::erase_if(suspicions_, [this](const Suspicion& s) {
    return s.epoch != view_.epoch || !in_view(s.reporter);
  });
  next_suspicion_check_ = TimePoint::max();
  if (suspicions_.empty()) return {};
  std::set<MemberId> confirmed;
  auto consider = [&](MemberId id) {
    if (!in_view(id)) return;
    const TimePoint at = confirmed_dead_at(peers_.at(id), now);
    if (at <= now) {
      confirmed.insert(id);
    } else {
      next_suspicion_check_ = std::min(next_suspicion_check_, at);
    }
  };
  bool anyone = false;  // a report naming no suspect: whoever is silent
  for (const auto& s : suspicions_) {
    if (s.suspect != 0) consider(s.suspect);
    anyone = anyone || s.suspect == 0;
  }
  if (anyone) {
    for (const auto& m : view_.members) consider(m.id);
  }
  if (!confirmed.empty()) {
    Gone gone;
    for (MemberId id : confirmed) gone.emplace_back(id, RemovalReason::kFailureConfirmed,
                                                    first_reporter(id));
    return remove_all(gone, ViewCause::kFailure, now);
  }
  for (const auto& s : suspicions_) {
    if (now - s.reported_at > config_.heartbeat_timeout) {
      // The suspect keeps heartbeating and the reporter can still talk: the epoch's links
      // are broken, not a member. A fresh epoch with the same members rebuilds them.
      const std::string silence =
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(config_.confirm_silence)
                  .count()) +
          " ms";
      const std::string line =
          "failure report by member " + std::to_string(s.reporter) + " in epoch " +
          std::to_string(s.epoch) +
          (s.suspect
               ? " about member " + std::to_string(s.suspect) +
                     " not confirmed: the suspect is alive (heard from within " + silence + ")"
               : " (no suspect named) not confirmed: no member has been silent for more "
                 "than " +
                     silence) +
          "; new view with the same members to rebuild the links";
      Decisions out = remove_all({}, ViewCause::kLinkRebuild, now, /*force=*/true);
      out.log.push_back(line);
      return out;
    }
    next_suspicion_check_ =
        std::min(next_suspicion_check_,
                 saturating_add(s.reported_at, config_.heartbeat_timeout + Duration{1}));
  }
  return {};
}

Decisions Membership::step_timing(MemberId id, std::uint64_t step, double compute_seconds,
                                  TimePoint now) {
  if (!config_.straggler.enabled || !in_view(id)) return {};
  PeerState& peer = peers_.at(id);
  if (peer.last_timed_step && step <= *peer.last_timed_step) {
    Decisions out;
    out.refused.push_back("step timing of member " + std::to_string(id) + " for step " +
                          std::to_string(step) + " refused: it reported step " +
                          std::to_string(*peer.last_timed_step) + " already");
    return out;
  }
  peer.last_timed_step = step;
  // The first interval after entering a view spans the join (connecting, receiving the
  // state), not compute: it completes the step but is not judged.
  step_times_[step][id] = peer.timing_warmup ? kNotJudged : compute_seconds;
  peer.timing_warmup = false;
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
    if (in_view(id) && t != kNotJudged) times[id] = t;
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
        std::to_string(step) + " in " + seconds_text(v.seconds) + " > " + factor_text(sc.k) +
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
    cooldown_until_[p.labels.name] = saturating_add(now, sc.cooldown);
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

Membership::Gone Membership::silent_in_ready_round(TimePoint now) const {
  Gone silent;
  if (!ready_round_waiting()) return silent;
  for (const auto& m : view_.members) {
    const PeerState& p = peers_.at(m.id);
    const bool ready = p.ready && p.ready->epoch == view_.epoch;
    if (!ready && now - p.last_heartbeat > confirm_silence(now))
      silent.emplace_back(m.id, RemovalReason::kFailureConfirmed);
  }
  return silent;
}

}  // namespace tributary::membership
