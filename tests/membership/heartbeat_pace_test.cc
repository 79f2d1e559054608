// The heartbeat budget (membership/heartbeat_pace.h) and what the membership does with
// it: a paced interval, silences judged at that pace, and probes that keep a reported
// failure fast however slow the pace. FakeClock only.
#include <gtest/gtest.h>

#include "membership/heartbeat_pace.h"
#include "membership/membership.h"

namespace tributary::membership {
namespace {

using std::chrono::milliseconds;

TEST(HeartbeatPace, IntervalGrowsWithTheMembershipToStayWithinTheBudget) {
  HeartbeatPace pace(milliseconds(100), 1000, milliseconds(1000));
  const TimePoint t0{};
  pace.resize(64, t0);
  EXPECT_EQ(pace.interval(), milliseconds(100)) << "640/s: within 1000/s at the base interval";
  EXPECT_EQ(pace.scale(t0), 1.0);
  pace.resize(4096, t0);
  EXPECT_EQ(pace.interval(), std::chrono::microseconds(4096000)) << "4096 / 1000 per second";
  EXPECT_DOUBLE_EQ(pace.scale(t0), 40.96);
  EXPECT_EQ(pace.scaled(milliseconds(1000), t0), milliseconds(40960));
}

TEST(HeartbeatPace, AShrinkKeepsTheOldScaleForOneOldTimeout) {
  HeartbeatPace pace(milliseconds(100), 100, milliseconds(1000));
  const TimePoint t0{};
  pace.resize(40, t0);  // 400 ms: scale 4, timeout 4 s
  pace.resize(10, t0 + milliseconds(500));
  EXPECT_EQ(pace.interval(), milliseconds(100)) << "members are asked for the faster pace at once";
  EXPECT_EQ(pace.scale(t0 + milliseconds(4499)), 4.0)
      << "but judged by the slower one until they can have followed";
  EXPECT_EQ(pace.scale(t0 + milliseconds(4500)), 1.0);
}

TEST(HeartbeatPace, ZeroBaseOrRateTurnsPacingOff) {
  HeartbeatPace off(milliseconds(100), 0, milliseconds(1000));
  off.resize(100000, TimePoint{});
  EXPECT_EQ(off.interval(), milliseconds(100));
  EXPECT_EQ(off.scale(TimePoint{}), 1.0);
  HeartbeatPace no_base(Duration::zero(), 10, milliseconds(1000));
  no_base.resize(100000, TimePoint{});
  EXPECT_EQ(no_base.interval(), Duration::zero());
}

MembershipConfig paced(std::size_t initial) {
  MembershipConfig c;
  c.initial_world_size = initial;
  c.heartbeat_timeout = milliseconds(1000);
  c.confirm_silence = milliseconds(300);
  c.heartbeat_interval = milliseconds(100);
  c.max_heartbeat_rate = 20;  // 8 members: 400 ms, everything judged 4x longer
  c.straggler.enabled = false;
  return c;
}

struct PacedCluster {
  FakeClock clock;
  Membership m{paced(8)};
  std::vector<MemberId> ids;
  PacedCluster() {
    for (int i = 0; i < 8; ++i) {
      const std::string name = "m" + std::to_string(i);
      ids.push_back(m.join({name, "h" + name, "z", "127.0.0.1:1", {"tcp"}}, clock.now())->id);
    }
    EXPECT_EQ(m.epoch(), 1u);
  }
  void heartbeat_all_but(MemberId silent) {
    for (MemberId id : ids)
      if (id != silent && m.find(id)) m.heartbeat(id, m.epoch(), 0, clock.now());
  }
};

TEST(PacedMembership, SilenceIsJudgedAtThePaceMembersWereAskedFor) {
  PacedCluster c;
  EXPECT_EQ(c.m.heartbeat_interval(), milliseconds(400));
  EXPECT_EQ(c.m.heartbeat_timeout(c.clock.now()), milliseconds(4000));
  for (int i = 0; i < 9; ++i) {  // heartbeats every 400 ms: never late at this pace
    c.clock.advance(milliseconds(400));
    c.heartbeat_all_but(c.ids[7]);
    EXPECT_TRUE(c.m.tick(c.clock.now()).removed.empty()) << "3.6 s of silence is not 4 s";
  }
  c.clock.advance(milliseconds(401));
  const Decisions d = c.m.tick(c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[7]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kHeartbeatTimeout);
}

TEST(PacedMembership, AProbeConfirmsAReportedFailureWithinTheUnscaledSilence) {
  PacedCluster c;
  c.clock.advance(milliseconds(350));  // everyone last heard at 0: within the paced 1.2 s
  Decisions d = c.m.failure_report(c.ids[0], 1, 0, c.clock.now());
  EXPECT_TRUE(d.probe);
  EXPECT_TRUE(d.removed.empty()) << "350 ms of silence proves nothing at a 400 ms pace";
  EXPECT_FALSE(c.m.failure_report(c.ids[1], 1, 0, c.clock.now()).probe)
      << "one probe answers every report within confirm_silence";
  c.clock.advance(milliseconds(20));
  c.heartbeat_all_but(c.ids[5]);  // the answers to the probe; member 5 is dead
  c.clock.set(c.m.next_expiry());
  EXPECT_EQ(c.clock.now(), TimePoint{} + milliseconds(650) + Duration{1});
  d = c.m.tick(c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u) << "only the member that did not answer";
  EXPECT_EQ(d.removed[0].id, c.ids[5]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kFailureConfirmed);
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.new_view->size(), 7u);
}

TEST(PacedMembership, ALiveSuspectThatAnswersTheProbeIsNotRemoved) {
  PacedCluster c;
  c.clock.advance(milliseconds(350));
  EXPECT_TRUE(c.m.failure_report(c.ids[0], 1, c.ids[3], c.clock.now()).probe);
  c.clock.advance(milliseconds(5));
  c.heartbeat_all_but(0);
  c.clock.advance(milliseconds(300));
  EXPECT_TRUE(c.m.tick(c.clock.now()).removed.empty());
}

}  // namespace
}  // namespace tributary::membership
