// The recovery decision (agent/recovery.h), exhaustively: every status code an attempt
// can fail with x held or not x re-run allowed or not x where commit_through falls
// relative to seq, and every way the move to the next view can fail.
#include "agent/recovery.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <vector>

namespace tributary::agent {
namespace {

constexpr std::uint64_t kSeq = 41;

std::vector<StatusCode> failure_codes() {
  std::vector<StatusCode> codes;
  for (int c = static_cast<int>(StatusCode::kPeerLost);
       c <= static_cast<int>(StatusCode::kRoundFailed); ++c) {
    codes.push_back(static_cast<StatusCode>(c));
  }
  return codes;
}

// The failures a new epoch can fix, as docs/fault-tolerance.md lists them.
const std::set<StatusCode> kRetryable = {StatusCode::kPeerLost, StatusCode::kTimedOut,
                                         StatusCode::kAborted,  StatusCode::kStaleEpoch,
                                         StatusCode::kBadFrame, StatusCode::kInternal};

// commit_through values below, at and above seq.
const std::vector<std::uint64_t> kBelow = {0, 1, kSeq - 1};
const std::vector<std::uint64_t> kAtOrAbove = {kSeq, kSeq + 1,
                                               std::numeric_limits<std::uint64_t>::max()};

AttemptFailure failure(StatusCode code, bool held, bool retry) {
  return {kSeq, held, error(code, "attempt failed: " + std::string(to_string(code))), retry};
}

TEST(Recovery, RetryableCodesAreExactlyThoseANewEpochCanFix) {
  EXPECT_EQ(failure_codes().size(), 12u) << "a new StatusCode: decide whether it is retryable";
  for (StatusCode code : failure_codes()) {
    EXPECT_EQ(retryable(error(code, "x")), kRetryable.contains(code)) << to_string(code);
  }
  EXPECT_FALSE(retryable(Status::ok()));
}

TEST(Recovery, HeldResultOfACommittedCollectiveIsKeptWhateverTheFailure) {
  for (StatusCode code : failure_codes()) {
    for (bool retry : {false, true}) {
      for (std::uint64_t through : kAtOrAbove) {
        const RecoveryDecision d = decide_recovery(failure(code, true, retry), through);
        EXPECT_EQ(d.verdict, Verdict::kCommit) << to_string(code) << " through " << through;
        EXPECT_TRUE(d.status.is_ok());
      }
    }
  }
}

TEST(Recovery, CommittedCollectiveWithoutTheResultIsAnInternalErrorNeverAReRun) {
  for (StatusCode code : failure_codes()) {
    for (bool retry : {false, true}) {
      for (std::uint64_t through : kAtOrAbove) {
        const RecoveryDecision d = decide_recovery(failure(code, false, retry), through);
        EXPECT_EQ(d.verdict, Verdict::kFail) << to_string(code) << " through " << through;
        EXPECT_EQ(d.status.code(), StatusCode::kInternal);
        EXPECT_EQ(d.status.message(),
                  "the coordinator committed seq 41 but this member does "
                  "not hold its result");
      }
    }
  }
}

TEST(Recovery, AbortedCollectiveIsReRunOnlyForRetryableFailuresWhenAllowed) {
  for (StatusCode code : failure_codes()) {
    for (bool held : {false, true}) {
      for (bool retry : {false, true}) {
        for (std::uint64_t through : kBelow) {
          const AttemptFailure f = failure(code, held, retry);
          const RecoveryDecision d = decide_recovery(f, through);
          SCOPED_TRACE(std::string(to_string(code)) + " held " + std::to_string(held) + " retry " +
                       std::to_string(retry) + " through " + std::to_string(through));
          if (retry && kRetryable.contains(code)) {
            EXPECT_EQ(d.verdict, Verdict::kReRun);
            EXPECT_TRUE(d.status.is_ok());
          } else {
            EXPECT_EQ(d.verdict, Verdict::kFail);
            EXPECT_EQ(d.status.code(), code) << "the attempt's own status, unchanged";
            EXPECT_EQ(d.status.message(), f.status.message());
          }
        }
      }
    }
  }
}

TEST(Recovery, FailedMoveToTheNextViewFailsWithItsCodeAndSaysWhatWasRecovered) {
  for (StatusCode moved : failure_codes()) {
    for (StatusCode code : failure_codes()) {
      for (bool held : {false, true}) {
        const AttemptFailure f = failure(code, held, true);
        const RecoveryDecision d = decide_recovery(f, error(moved, "no view by the deadline"));
        EXPECT_EQ(d.verdict, Verdict::kFail);
        EXPECT_EQ(d.status.code(), moved);
        EXPECT_EQ(d.status.message(),
                  "recovering from \"" + f.status.to_string() + "\": no view by the deadline");
      }
    }
  }
}

// Across members: under one Go, no member keeps the result while another re-runs the
// collective (the all-or-nothing guarantee's agent side).
TEST(Recovery, OneGoNeverMakesOneMemberCommitAndAnotherReRun) {
  std::vector<std::uint64_t> throughs = kBelow;
  throughs.insert(throughs.end(), kAtOrAbove.begin(), kAtOrAbove.end());
  for (std::uint64_t through : throughs) {
    std::set<Verdict> verdicts;
    for (StatusCode code : failure_codes()) {
      for (bool held : {false, true}) {
        for (bool retry : {false, true}) {
          verdicts.insert(decide_recovery(failure(code, held, retry), through).verdict);
        }
      }
    }
    EXPECT_FALSE(verdicts.contains(Verdict::kCommit) && verdicts.contains(Verdict::kReRun))
        << "through " << through;
  }
}

TEST(Recovery, ReadyReportsTheHeldSeqOnlyWhenTheResultIsHeld) {
  EXPECT_EQ(failure(StatusCode::kPeerLost, true, true).held_seq(), kSeq);
  EXPECT_EQ(failure(StatusCode::kPeerLost, false, true).held_seq(), 0u);
}

TEST(Recovery, VerdictsHaveNames) {
  EXPECT_EQ(to_string(Verdict::kCommit), "commit");
  EXPECT_EQ(to_string(Verdict::kReRun), "re-run");
  EXPECT_EQ(to_string(Verdict::kFail), "fail");
}

}  // namespace
}  // namespace tributary::agent
