#include "membership/commit_rule.h"

#include <algorithm>

namespace tributary::membership {

std::uint64_t commit_through(std::span<const ReadyReport> survivors) {
  std::uint64_t through = 0;
  for (const auto& r : survivors) through = std::max(through, r.committed_seq);
  // Any held H above `through` qualifies only if every survivor holds it or is past it;
  // try the largest first (at most one collective is in flight, so this is one or two).
  std::uint64_t best = through;
  for (const auto& candidate : survivors) {
    const std::uint64_t h = candidate.held_seq;
    if (h <= best) continue;
    const bool everyone =
        std::all_of(survivors.begin(), survivors.end(),
                    [h](const ReadyReport& r) { return r.held_seq == h || r.committed_seq >= h; });
    if (everyone) best = h;
  }
  return best;
}

}  // namespace tributary::membership
