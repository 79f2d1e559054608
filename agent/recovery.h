// The recovery decision of one collective (docs/fault-tolerance.md, "Slow path"): what a
// member does with an attempt that failed, once it has moved to the next view and the
// coordinator's Go has told it `commit_through`. Pure: statuses and numbers in, a verdict
// out; no link, no clock, no coordinator. Worker::Impl::run carries the verdict out.
//
// The rules, each tested in tests/agent/recovery_test.cc:
//  - The coordinator committed the collective (commit_through >= seq): a member that holds
//    the full result keeps it (kCommit: the outcome names the failed epoch and its members).
//    A member that does not hold it cannot follow: kFail with kInternal (the commit rule
//    makes this impossible; reaching it means the protocol is broken, and the caller must
//    not re-run a collective that others kept).
//  - Otherwise the collective is aborted on every member: it is re-run in the new view
//    with the original inputs (kReRun) if the failure is one a new epoch can fix
//    (retryable()) and the caller re-runs failures; else kFail with the attempt's status.
//  - The move to the next view failed (evicted, no view or no quorum before the recovery
//    deadline): kFail with that status's code, its message saying what was being recovered.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace tributary::agent {

// Failures that a re-run in a new epoch can fix: a lost or frozen peer, a link aborted by
// a newer view, a stale or bad frame from a peer, an unclassified OS error. Not: argument
// mismatches across ranks, bad arguments, authentication, eviction, no coordinator.
bool retryable(const Status& status);

// One failed attempt of collective `seq`.
struct AttemptFailure {
  std::uint64_t seq = 0;
  bool held = false;  // this member finished the data phase: it holds the full result
  Status status;      // why the attempt failed
  bool retry = true;  // false: failures return to the caller (the state sync decides itself)

  // What this member tells the coordinator in Ready about the epoch it leaves.
  std::uint64_t held_seq() const { return held ? seq : 0; }
};

enum class Verdict : std::uint8_t {
  kCommit,  // keep the held result: the collective committed in the failed epoch
  kReRun,   // restore the original inputs and run again in the new view
  kFail,    // return `status` to the caller
};
std::string_view to_string(Verdict verdict);

struct RecoveryDecision {
  Verdict verdict = Verdict::kFail;
  Status status;  // kFail: what the call returns; ok otherwise
};

// `commit_through`: the Go of the view the member moved to; or the status of a move that
// failed.
RecoveryDecision decide_recovery(const AttemptFailure& failure,
                                 const Result<std::uint64_t>& commit_through);

}  // namespace tributary::agent
