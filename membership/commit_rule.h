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
// A small all-reduce returned without the round (a speculative return) may leave the
// others lacking S; the rule still commits S and the members repair the laggards from the
// returner's copy (docs/fault-tolerance.md, "Small all-reduces: speculative return").
//
// Reports come from the network, so a claim no honest member can make is refused (left
// out of the decision) rather than believed: a seq at or beyond kSeqLimit; a held seq
// other than committed_seq + 1 (a member holds at most the collective after its last
// commit); a committed seq above what the coordinator told the survivors at the start of
// their epoch (`known`) that no other survivor witnesses (for an honest claim every other
// member of the epoch committed it too, or holds it), unless every other survivor returned
// the seq before it (a speculative return: the claim is at most one past everybody, and
// if its claimant holds no copy, the members' repair step finds none and re-runs it). Without the refusal one member
// claiming committed_seq 2^64-1 made every honest member exit (told to commit what it did
// not hold). A member that lies low can still lower commit_through; that costs the others
// a re-run, never their membership.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "membership/view.h"

namespace tributary::membership {

// Seqs are below 2^56: the top byte of a data-plane seq names its space
// (algorithms/seq_space.h, kCallerSeqLimit).
inline constexpr std::uint64_t kSeqLimit = std::uint64_t{1} << 56;

struct ReadyReport {
  Epoch epoch = 0;           // the view the member adopted
  Epoch previous_epoch = 0;  // the view it left (0: a joiner)
  std::uint64_t committed_seq = 0;
  std::uint64_t held_seq = 0;  // 0: none

  friend bool operator==(const ReadyReport&, const ReadyReport&) = default;
};

// What a leaving member says about itself (the Leave message).
struct LeaveTerms {
  Epoch epoch = 0;            // the last view it adopted (got a Go for)
  bool holds_result = false;  // it keeps a returned result a peer may lack (result_copy.h)
};

struct CommitDecision {
  std::uint64_t commit_through = 0;
  struct Refusal {
    std::size_t index = 0;  // into the survivors
    std::string why;
  };
  std::vector<Refusal> refused;
};

// `known`: the commit_through the survivors were told when their epoch started (0 when
// the coordinator does not know it, after a restart). With no report accepted, `known`.
CommitDecision decide_commit(std::span<const ReadyReport> survivors, std::uint64_t known = 0);

// decide_commit(survivors).commit_through: 0 for no reports.
std::uint64_t commit_through(std::span<const ReadyReport> survivors);

}  // namespace tributary::membership
