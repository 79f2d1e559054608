// How a link that polls memory paces its waiting (transport/poll_pace.h), by hand-driven time.
#include <gtest/gtest.h>

#include "transport/poll_pace.h"

namespace tributary::transport {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Next = PollPace::Next;

TEST(PollPace, LooksAgainWhileTheLooksMoveAndGlancesAtTheConnectionsEveryPulse) {
  const TimePoint t0{};
  PollPace pace(t0, microseconds(50), milliseconds(1));
  EXPECT_EQ(pace.after(true, t0 + microseconds(10)), Next::kLook);
  EXPECT_EQ(pace.after(true, t0 + microseconds(900)), Next::kLook);
  // The first pulse is a pulse after the first spin window: at 1050 us.
  EXPECT_EQ(pace.after(true, t0 + microseconds(1040)), Next::kLook);
  EXPECT_EQ(pace.after(true, t0 + microseconds(1050)), Next::kLookAtConnections);
  EXPECT_EQ(pace.after(true, t0 + microseconds(1500)), Next::kLook);
  EXPECT_EQ(pace.after(true, t0 + microseconds(2050)), Next::kLookAtConnections);
}

TEST(PollPace, YieldsUntilBusyPollHasPassedSinceTheLastProgressThenSleeps) {
  const TimePoint t0{};
  PollPace pace(t0, microseconds(50));
  EXPECT_EQ(pace.after(false, t0 + microseconds(20)), Next::kYield);
  EXPECT_EQ(pace.after(false, t0 + microseconds(49)), Next::kYield);
  EXPECT_EQ(pace.after(false, t0 + microseconds(50)), Next::kSleep);
  // Progress opens a new window from its own time.
  EXPECT_EQ(pace.after(true, t0 + microseconds(60)), Next::kLook);
  EXPECT_EQ(pace.after(false, t0 + microseconds(100)), Next::kYield);
  EXPECT_EQ(pace.after(false, t0 + microseconds(110)), Next::kSleep);
}

TEST(PollPace, WorkFoundInsteadOfSleepingSpinsAgainAndASleepPushesThePulseOn) {
  const TimePoint t0{};
  PollPace pace(t0, microseconds(50), milliseconds(1));
  EXPECT_EQ(pace.after(false, t0 + microseconds(60)), Next::kSleep);
  pace.found_work(t0 + microseconds(60));  // acknowledgements to send: no sleep
  EXPECT_EQ(pace.after(false, t0 + microseconds(100)), Next::kYield);
  EXPECT_EQ(pace.after(false, t0 + microseconds(110)), Next::kSleep);
  pace.slept(t0 + milliseconds(5));  // woken at 5 ms: the next glance is a pulse later
  EXPECT_EQ(pace.after(true, t0 + microseconds(5500)), Next::kLook);
  EXPECT_EQ(pace.after(true, t0 + milliseconds(6)), Next::kLookAtConnections);
}

}  // namespace
}  // namespace tributary::transport
