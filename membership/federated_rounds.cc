#include "membership/federated_rounds.h"

#include <algorithm>
#include <cmath>

#include "membership/commit_rule.h"

namespace tributary::membership {
namespace {

std::string round_name(std::uint64_t round) { return "round " + std::to_string(round); }

// Why a RoundReady cannot be believed; empty when it can.
std::string invalid(const RoundReady& r, const View& view) {
  if (!(std::isfinite(r.weight) && r.weight > 0 && r.weight <= kMaxRoundWeight))
    return "weight " + std::to_string(r.weight) + " is not finite, > 0 and <= 1e15";
  if (r.deadline <= Duration::zero() || r.deadline > kMaxRoundDeadline)
    return "deadline is not in (0, 24 h]";
  if (r.min_participants == 0) return "min_participants is 0";
  if (r.round >= kSeqLimit) return "round " + std::to_string(r.round) + " is at or beyond 2^56";
  if (!view.contains(r.member)) return "sender is not in view " + std::to_string(view.epoch);
  return {};
}

}  // namespace

void RoundOutput::append(RoundOutput more) {
  for (auto& d : more.decided) decided.push_back(std::move(d));
  for (auto& r : more.replies) replies.push_back(std::move(r));
  for (auto& c : more.committed) committed.push_back(std::move(c));
  for (auto& l : more.log) log.push_back(std::move(l));
  for (auto& l : more.refused) refused.push_back(std::move(l));
  late += more.late;
}

RoundOutput FederatedRounds::ready(const RoundReady& r, const View& view, TimePoint now) {
  RoundOutput out;
  if (std::string why = invalid(r, view); !why.empty()) {
    out.refused.push_back("RoundReady of member " + std::to_string(r.member) + " for " +
                          round_name(r.round) + ": " + why);
    return out;
  }
  auto it = rounds_.find(r.round);
  if (it != rounds_.end() && it->second.phase != Phase::kOpen) {
    out.replies.emplace_back(r.member, it->second.decision);
    return out;
  }
  if (it == rounds_.end() && rounds_.size() >= kept_ && r.round < rounds_.begin()->first) {
    RoundDecision forgotten;
    forgotten.epoch = view.epoch;
    forgotten.round = r.round;
    forgotten.failed = true;
    forgotten.reason = round_name(r.round) + ": older than the last " + std::to_string(kept_) +
                       " rounds the coordinator keeps";
    out.replies.emplace_back(r.member, std::move(forgotten));
    return out;
  }
  // A member behind the current view learns of it and asks again in the new epoch.
  if (r.epoch != view.epoch) return out;
  if (it == rounds_.end()) {
    Round fresh;
    fresh.epoch = view.epoch;
    fresh.opened_at = now;
    fresh.deadline = r.deadline;
    fresh.min_participants = r.min_participants;
    it = rounds_.emplace(r.round, std::move(fresh)).first;
    out.log.push_back(round_name(r.round) + " opened by member " + std::to_string(r.member) +
                      " in epoch " + std::to_string(view.epoch) + ": deadline " +
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         r.deadline)
                                         .count()) +
                      " ms, min_participants " + std::to_string(r.min_participants));
    keep_within_bound();
    it = rounds_.find(r.round);
    if (it == rounds_.end()) return out;  // bounded away at once (a flood of rounds)
  }
  Round& round = it->second;
  round.ready[r.member] = r.weight;
  if (round.ready.size() == view.size()) out.append(decide(r.round, round, round.ready, view));
  return out;
}

RoundOutput FederatedRounds::decide(std::uint64_t number, Round& round,
                                    const std::map<MemberId, double>& weights, const View& view,
                                    bool again) {
  RoundDecision d;
  d.epoch = view.epoch;
  d.round = number;
  d.members = static_cast<std::uint32_t>(view.size());
  d.min_participants = round.min_participants;
  for (const auto& m : view.members) {  // by rank
    if (auto w = weights.find(m.id); w != weights.end()) d.contributors.push_back({m.id, w->second});
  }
  RoundOutput out;
  if (d.contributors.size() < round.min_participants) {
    d.failed = true;
    d.reason = round_name(number) + ": " + std::to_string(d.contributors.size()) + " of " +
               std::to_string(d.members) + " members contributed by the deadline, fewer than " +
               "min_participants " + std::to_string(round.min_participants);
    d.contributors.clear();
    round.phase = Phase::kFinal;
    out.log.push_back(d.reason + ": the round fails");
  } else {
    round.phase = Phase::kDecided;
    if (!again) out.late = d.members - d.contributors.size();
    out.log.push_back(round_name(number) + " decided in epoch " + std::to_string(d.epoch) + ": " +
                      std::to_string(d.contributors.size()) + " of " + std::to_string(d.members) +
                      " members contribute");
  }
  round.ready.clear();
  round.done.clear();
  round.epoch = view.epoch;
  round.decision = d;
  out.decided.push_back(std::move(d));
  return out;
}

RoundOutput FederatedRounds::done(MemberId id, Epoch epoch, std::uint64_t round) {
  RoundOutput out;
  auto it = rounds_.find(round);
  if (it == rounds_.end()) return out;
  Round& r = it->second;
  const RoundDecision& d = r.decision;
  if (r.phase == Phase::kOpen || d.epoch != epoch || !d.contributed(id)) return out;
  std::vector<MemberId> ids;
  for (const auto& c : d.contributors) ids.push_back(c.id);
  if (r.phase == Phase::kFinal) {
    // A repeated RoundDone: the commit it waits for was lost; send it again.
    if (d.committed) out.committed.push_back({epoch, round, {id}, /*resend=*/true});
    return out;
  }
  r.done.insert(id);
  if (r.done.size() < d.contributors.size()) return out;
  r.phase = Phase::kFinal;
  r.decision.committed = true;
  out.committed.push_back({epoch, round, std::move(ids)});
  out.log.push_back(round_name(round) + " committed in epoch " + std::to_string(epoch));
  return out;
}

RoundOutput FederatedRounds::tick(const View& view, TimePoint now) {
  RoundOutput out;
  for (auto& [number, round] : rounds_) {
    if (round.phase == Phase::kOpen && now >= round.opened_at + round.deadline) {
      out.append(decide(number, round, round.ready, view));
    }
  }
  return out;
}

RoundOutput FederatedRounds::on_view(const View& view, TimePoint now) {
  RoundOutput out;
  for (auto& [number, round] : rounds_) {
    if (round.phase == Phase::kFinal || round.epoch >= view.epoch) continue;
    if (round.phase == Phase::kOpen) {
      std::erase_if(round.ready, [&](const auto& entry) { return !view.contains(entry.first); });
      round.epoch = view.epoch;
      if (round.ready.size() == view.size() || now >= round.opened_at + round.deadline) {
        out.append(decide(number, round, round.ready, view));
      }
      continue;
    }
    // Decided, not committed: aborted in the old epoch; its survivors run it again.
    std::map<MemberId, double> survivors;
    for (const auto& c : round.decision.contributors) {
      if (view.contains(c.id)) survivors.emplace(c.id, c.weight);
    }
    out.log.push_back(round_name(number) + " of epoch " + std::to_string(round.decision.epoch) +
                      " did not commit before epoch " + std::to_string(view.epoch) + "; " +
                      std::to_string(survivors.size()) + " of its " +
                      std::to_string(round.decision.contributors.size()) +
                      " contributors run it again");
    out.append(decide(number, round, survivors, view, /*again=*/true));
  }
  return out;
}

TimePoint FederatedRounds::next_deadline() const {
  TimePoint next = TimePoint::max();
  for (const auto& [number, round] : rounds_) {
    if (round.phase == Phase::kOpen) next = std::min(next, round.opened_at + round.deadline);
  }
  return next;
}

const RoundDecision* FederatedRounds::decision(std::uint64_t round) const {
  auto it = rounds_.find(round);
  if (it == rounds_.end() || it->second.phase == Phase::kOpen) return nullptr;
  return &it->second.decision;
}

void FederatedRounds::keep_within_bound() {
  while (rounds_.size() > kept_) rounds_.erase(rounds_.begin());
}

}  // namespace tributary::membership
