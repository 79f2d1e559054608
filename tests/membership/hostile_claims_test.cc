// Claims from members that the membership logic must not believe (a member holding the
// secret can send anything), and failures it must confirm without waiting for a timeout.
// FakeClock only.
#include <gtest/gtest.h>

#include "membership/commit_rule.h"
#include "membership/membership.h"
#include "tests/membership/cluster.h"

namespace tributary::membership {
namespace {

using std::chrono::milliseconds;
using testing::Cluster;

constexpr std::uint64_t kMax = ~std::uint64_t{0};

TEST(ImpossibleClaims, CommitRuleLeavesOutWhatNoHonestMemberCanReport) {
  using R = ReadyReport;
  // Beyond every seq space.
  auto d = decide_commit(std::vector<R>{{2, 1, 10, 0}, {2, 1, kMax, 0}}, 4);
  EXPECT_EQ(d.commit_through, 10u);
  ASSERT_EQ(d.refused.size(), 1u);
  EXPECT_EQ(d.refused[0].index, 1u);
  // Above the epoch's start, and nobody else holds or committed it.
  d = decide_commit(std::vector<R>{{2, 1, 10, 11}, {2, 1, 10, 11}, {2, 1, 5000, 0}}, 4);
  EXPECT_EQ(d.commit_through, 11u) << "the held result the honest two agree on still commits";
  ASSERT_EQ(d.refused.size(), 1u);
  EXPECT_NE(d.refused[0].why.find("no other survivor"), std::string::npos) << d.refused[0].why;
  // A held seq that is not the one after the last commit.
  d = decide_commit(std::vector<R>{{2, 1, 10, 0}, {2, 1, 10, 900}}, 4);
  EXPECT_EQ(d.commit_through, 10u);
  ASSERT_EQ(d.refused.size(), 1u);
  // What the coordinator itself told them needs no witness: a survivor beside a joiner
  // of the last epoch that never ran it.
  d = decide_commit(std::vector<R>{{2, 1, 4, 0}, {2, 1, 0, 0}}, 4);
  EXPECT_EQ(d.commit_through, 4u);
  EXPECT_TRUE(d.refused.empty());
  // Nothing believable: what the coordinator knows.
  d = decide_commit(std::vector<R>{{2, 1, kMax, 0}}, 4);
  EXPECT_EQ(d.commit_through, 4u);
  // A small all-reduce one member returned without the commit round (a speculative
  // return): nobody else holds it, but everybody returned the one before. Believed.
  d = decide_commit(std::vector<R>{{2, 1, 10, 0}, {2, 1, 11, 0}, {2, 1, 10, 0}}, 4);
  EXPECT_EQ(d.commit_through, 11u);
  EXPECT_TRUE(d.refused.empty());
  // ... and a survivor that never ran a collective of the epoch has returned what the
  // epoch started with.
  d = decide_commit(std::vector<R>{{2, 1, 5, 0}, {2, 1, 0, 0}}, 4);
  EXPECT_EQ(d.commit_through, 5u);
  EXPECT_TRUE(d.refused.empty());
  // Two past somebody is no speculative return: refused.
  d = decide_commit(std::vector<R>{{2, 1, 10, 0}, {2, 1, 12, 0}, {2, 1, 11, 0}}, 4);
  EXPECT_EQ(d.commit_through, 11u);
  ASSERT_EQ(d.refused.size(), 1u);
  EXPECT_EQ(d.refused[0].index, 1u);
}

TEST(ImpossibleClaims, ALyingSurvivorCannotPushCommitThroughPastWhatTheOthersHold) {
  Cluster c(3);
  c.m.remove(c.ids[2], RemovalReason::kHeartbeatTimeout, c.clock.now());  // epoch 2
  // Member 0 lies: it claims to have committed 2^64 - 1. On the old rule every honest
  // member was told to commit it and exited.
  EXPECT_FALSE(c.m.ready(c.ids[0], {2, 1, kMax, 0}, c.clock.now()).go);
  Decisions d = c.m.ready(c.ids[1], {2, 1, 7, 0}, c.clock.now());
  ASSERT_TRUE(d.go);
  EXPECT_EQ(d.go->commit_through, 7u);
  ASSERT_EQ(d.refused.size(), 1u);
  EXPECT_NE(d.refused[0].find("member " + std::to_string(c.ids[0])), std::string::npos)
      << d.refused[0];
  EXPECT_EQ(c.m.size(), 2u) << "refused, not removed: which of two disagreeing members lies "
                               "is not knowable";
}

TEST(ImpossibleClaims, HeartbeatNamingAnEpochNeverIssuedIsNotBelieved) {
  Cluster c(2);
  const Epoch before = c.m.find(c.ids[0])->known_epoch;  // 1: its Ready said so
  auto hb = c.m.heartbeat(c.ids[0], kMax, 3, c.clock.now());
  EXPECT_TRUE(hb.known);
  EXPECT_NE(hb.refused.find("epoch 18446744073709551615"), std::string::npos) << hb.refused;
  EXPECT_EQ(c.m.find(c.ids[0])->known_epoch, before);
  EXPECT_TRUE(c.m.heartbeat(c.ids[0], 1, 3, c.clock.now()).refused.empty());
  EXPECT_EQ(c.m.find(c.ids[0])->known_epoch, 1u);
}

TEST(ImpossibleClaims, FailureReportAboutANonMemberOrItselfIsRefusedAndRebuildsNothing) {
  Cluster c(3);
  for (MemberId suspect : {MemberId{999}, c.ids[1]}) {
    Decisions d = c.m.failure_report(c.ids[1], 1, suspect, c.clock.now());
    ASSERT_EQ(d.refused.size(), 1u);
    EXPECT_FALSE(d.new_view);
  }
  c.clock.advance(milliseconds(1500));
  c.heartbeat_all_but(0);
  EXPECT_TRUE(c.m.tick(c.clock.now()).empty())
      << "no link_rebuild view for a report that was never believed";
  EXPECT_EQ(c.m.epoch(), 1u);
}

TEST(ConfirmedFailures, TwoMembersKilledAtOnceAreBothRemovedWithinConfirmSilence) {
  Cluster c(4);
  const MemberId first = c.ids[2];
  const MemberId second = c.ids[3];
  // Both die: `first` at 0 ms, `second` at 250 ms; the living heartbeat every 50 ms.
  auto living_heartbeat = [&](Epoch e, std::initializer_list<MemberId> also = {}) {
    for (MemberId id : {c.ids[0], c.ids[1]}) c.m.heartbeat(id, e, 0, c.clock.now());
    for (MemberId id : also) c.m.heartbeat(id, e, 0, c.clock.now());
  };
  for (int i = 0; i < 8; ++i) {  // to 400 ms
    c.clock.advance(milliseconds(50));
    if (c.clock.now() <= TimePoint{} + milliseconds(250)) {
      living_heartbeat(1, {second});
    } else {
      living_heartbeat(1);
    }
  }
  // A survivor's collective failed: it reports (no suspect named); only `first` has been
  // silent for confirm_silence.
  Decisions d = c.m.failure_report(c.ids[0], 1, 0, c.clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_FALSE(d.new_view->contains(first)) << "epoch 2 is without `first`...";
  EXPECT_TRUE(d.new_view->contains(second)) << "...still holding `second` (silent 150 ms)";
  // The survivors adopt epoch 2 and wait for its Go, which waits for `second`'s Ready.
  c.m.ready(c.ids[0], {2, 1, 0, 0}, c.clock.now());
  c.m.ready(c.ids[1], {2, 1, 0, 0}, c.clock.now());
  d = {};
  for (int i = 0; i < 5 && !d.new_view; ++i) {  // to 650 ms at most
    c.clock.advance(milliseconds(50));
    living_heartbeat(2);
    d = c.clock.now() < c.m.next_expiry() ? Decisions{} : c.m.tick(c.clock.now());
  }
  ASSERT_TRUE(d.new_view) << "removed once silent for confirm_silence (300 ms), not after the "
                             "1 s heartbeat timeout";
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, second);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kFailureConfirmed);
  EXPECT_EQ(d.new_view->size(), 2u);
}

TEST(ConfirmedFailures, AMemberThatHeartbeatsIsNeverConfirmedByTheReadyRound) {
  Cluster c(3);
  c.m.remove(c.ids[2], RemovalReason::kHeartbeatTimeout, c.clock.now());  // epoch 2
  c.m.ready(c.ids[0], {2, 1, 0, 0}, c.clock.now());
  for (int i = 0; i < 15; ++i) {  // 1.5 s: slow to adopt the view, but alive
    c.clock.advance(milliseconds(100));
    c.heartbeat_all_but(0);
    EXPECT_TRUE(c.m.tick(c.clock.now()).removed.empty());
  }
  EXPECT_TRUE(c.m.ready(c.ids[1], {2, 1, 0, 0}, c.clock.now()).go);
}

}  // namespace
}  // namespace tributary::membership
