// The deadline of one attempt (agent/attempt_deadline.h): adaptive, capped by the
// collective timeout, and a time-out under the cap named as such.
#include "agent/attempt_deadline.h"

#include <gtest/gtest.h>

namespace tributary::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const TimePoint kStart = TimePoint{} + seconds(100);

TEST(AttemptDeadline, AdaptiveBelowTheCap) {
  // 5 s + 8 x 1 MB / 100 MB/s = 5.08 s, under a 30 s cap.
  const AttemptDeadline d = attempt_deadline(kStart, 1000000, 100e6, seconds(5), 8.0, seconds(30));
  EXPECT_FALSE(d.capped);
  EXPECT_EQ(d.deadline.at, kStart + milliseconds(5080));
}

TEST(AttemptDeadline, CapWinsOverALongAdaptiveDeadline) {
  // 5 s + 8 x 1 GB / 100 MB/s = 85 s: the 30 s timeout is the binding deadline.
  const AttemptDeadline d =
      attempt_deadline(kStart, 1000000000, 100e6, seconds(5), 8.0, seconds(30));
  EXPECT_TRUE(d.capped);
  EXPECT_EQ(d.deadline.at, kStart + seconds(30));
  const AttemptDeadline below = attempt_deadline(kStart, 0, 100e6, seconds(5), 8.0, seconds(1));
  EXPECT_TRUE(below.capped) << "a timeout under the floor caps the floor too";
  EXPECT_EQ(below.deadline.at, kStart + seconds(1));
}

TEST(AttemptDeadline, ZeroTimeoutMeansNoCapAndAnEqualOneDoesNotBind) {
  const AttemptDeadline none =
      attempt_deadline(kStart, 1000000000, 100e6, seconds(5), 8.0, Duration::zero());
  EXPECT_FALSE(none.capped);
  EXPECT_EQ(none.deadline.at, kStart + seconds(85));
  const AttemptDeadline equal = attempt_deadline(kStart, 0, 100e6, seconds(5), 8.0, seconds(5));
  EXPECT_FALSE(equal.capped);
  EXPECT_EQ(equal.deadline.at, kStart + seconds(5));
}

TEST(AttemptDeadline, TimeOutUnderTheCapNamesTheSetting) {
  const AttemptDeadline d = attempt_deadline(kStart, 0, 100e6, seconds(5), 8.0, milliseconds(250));
  const Status timed_out = error(StatusCode::kTimedOut, "no message from rank 1");
  const Status s =
      attempt_status(timed_out, d, kStart + milliseconds(250), milliseconds(250), "all_reduce", 7);
  EXPECT_EQ(s.code(), StatusCode::kTimedOut);
  EXPECT_EQ(s.message(),
            "all_reduce seq 7 did not complete within the collective timeout of 250 ms "
            "(WorkerConfig::collective_timeout, --timeout-ms): no message from rank 1");
}

TEST(AttemptDeadline, OtherFailuresAndUncappedTimeOutsPassThrough) {
  const AttemptDeadline capped =
      attempt_deadline(kStart, 0, 100e6, seconds(5), 8.0, milliseconds(250));
  const TimePoint after = kStart + seconds(1);
  const Status lost = error(StatusCode::kPeerLost, "rank 1 reset the connection");
  EXPECT_EQ(attempt_status(lost, capped, after, milliseconds(250), "all_reduce", 1).message(),
            lost.message());
  // A kTimedOut before the cap passed came from elsewhere (a peer's abort notice).
  const Status timed_out = error(StatusCode::kTimedOut, "peer timed out");
  EXPECT_EQ(attempt_status(timed_out, capped, kStart + milliseconds(10), milliseconds(250),
                           "all_reduce", 1)
                .message(),
            timed_out.message());
  const AttemptDeadline adaptive = attempt_deadline(kStart, 0, 100e6, seconds(5), 8.0, seconds(30));
  EXPECT_EQ(attempt_status(timed_out, adaptive, kStart + seconds(6), seconds(30), "all_reduce", 1)
                .message(),
            timed_out.message());
}

}  // namespace
}  // namespace tributary::agent
