// The coordinator's slow-path commit decision (docs/fault-tolerance.md, "Slow path").
//
// After a view change every member reports, for the epoch it leaves, the highest seq it
// committed and the seq whose full result it holds uncommitted (0: none). From the
// reports of the members that survive from the previous epoch:
//
//   commit_through = max committed_seq, raised to a held seq H when every survivor
//                    reported held_seq == H or committed_seq >= H.
//
// Safe because a member commits S on the fast path only after every member entered the
// barrier of S, i.e. every survivor holds S (or committed it); then this rule commits S too.
#pragma once

#include <cstdint>
#include <span>

#include "membership/view.h"

namespace tributary::membership {

struct ReadyReport {
  Epoch epoch = 0;           // the view the member adopted
  Epoch previous_epoch = 0;  // the view it left (0: a joiner)
  std::uint64_t committed_seq = 0;
  std::uint64_t held_seq = 0;  // 0: none

  friend bool operator==(const ReadyReport&, const ReadyReport&) = default;
};

// 0 for no reports.
std::uint64_t commit_through(std::span<const ReadyReport> survivors);

}  // namespace tributary::membership
