#include "membership/commit_rule.h"

#include <algorithm>

namespace tributary::membership {
namespace {

// Why no honest member sends `r` among `all` (empty: it may be honest).
std::string impossible(const ReadyReport& r, std::span<const ReadyReport> all,
                       std::uint64_t known) {
  if (r.committed_seq >= kSeqLimit || r.held_seq >= kSeqLimit)
    return "a seq at or beyond 2^56, outside every seq space";
  if (r.held_seq != 0 && r.held_seq != r.committed_seq + 1) {
    return "held_seq " + std::to_string(r.held_seq) + " is not committed_seq " +
           std::to_string(r.committed_seq) + " + 1";
  }
  if (r.committed_seq <= known || all.size() < 2) return {};
  std::size_t witnesses = 0;
  bool every_other_returned_the_one_before = true;
  for (const auto& other : all) {
    if (&other == &r) continue;
    witnesses += other.committed_seq >= r.committed_seq || other.held_seq == r.committed_seq;
    // A small all-reduce returned without the commit round (docs/fault-tolerance.md,
    // lemma 1): its returner may be alone, but then every member returned the seq before.
    every_other_returned_the_one_before &= std::max(other.committed_seq, known) + 1 >= r.committed_seq;
  }
  if (witnesses > 0 || every_other_returned_the_one_before) return {};
  return "committed_seq " + std::to_string(r.committed_seq) + " is above the " +
         std::to_string(known) +
         " its epoch started with, no other survivor holds or committed it, and not every "
         "other survivor returned the seq before it";
}

}  // namespace

CommitDecision decide_commit(std::span<const ReadyReport> survivors, std::uint64_t known) {
  CommitDecision out;
  std::vector<ReadyReport> accepted;
  for (std::size_t i = 0; i < survivors.size(); ++i) {
    std::string why = impossible(survivors[i], survivors, known);
    if (why.empty()) {
      accepted.push_back(survivors[i]);
    } else {
      out.refused.push_back({i, std::move(why)});
    }
  }
  if (accepted.empty()) {
    out.commit_through = known;
    return out;
  }
  std::uint64_t through = 0;
  for (const auto& r : accepted) through = std::max(through, r.committed_seq);
  // Any held H above `through` qualifies only if every survivor holds it or is past it;
  // try the largest first (at most one collective is in flight, so this is one or two).
  std::uint64_t best = through;
  for (const auto& candidate : accepted) {
    const std::uint64_t h = candidate.held_seq;
    if (h <= best) continue;
    const bool everyone = std::all_of(accepted.begin(), accepted.end(), [h](const ReadyReport& r) {
      return r.held_seq == h || r.committed_seq >= h;
    });
    if (everyone) best = h;
  }
  out.commit_through = best;
  return out;
}

std::uint64_t commit_through(std::span<const ReadyReport> survivors) {
  return decide_commit(survivors).commit_through;
}

}  // namespace tributary::membership
