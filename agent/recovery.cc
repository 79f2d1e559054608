#include "agent/recovery.h"

#include <string>

namespace tributary::agent {

bool retryable(const Status& s) {
  switch (s.code()) {
    case StatusCode::kPeerLost:
    case StatusCode::kTimedOut:
    case StatusCode::kAborted:
    case StatusCode::kStaleEpoch:
    case StatusCode::kBadFrame:
    case StatusCode::kInternal: return true;
    default: return false;
  }
}

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kCommit: return "commit";
    case Verdict::kReRun: return "re-run";
    case Verdict::kFail: return "fail";
  }
  return "unknown";
}

RecoveryDecision decide_recovery(const AttemptFailure& failure,
                                 const Result<std::uint64_t>& commit_through) {
  if (!commit_through) {
    return {Verdict::kFail, error(commit_through.status().code(),
                                  "recovering from \"" + failure.status.to_string() +
                                      "\": " + commit_through.status().message())};
  }
  if (commit_through.value() >= failure.seq) {
    if (failure.held) return {Verdict::kCommit, Status::ok()};
    return {Verdict::kFail, error(StatusCode::kInternal,
                                  "the coordinator committed seq " + std::to_string(failure.seq) +
                                      " but this member does not hold its result")};
  }
  if (!failure.retry || !retryable(failure.status)) return {Verdict::kFail, failure.status};
  return {Verdict::kReRun, Status::ok()};
}

}  // namespace tributary::agent
