// PairPaths (transport/pair_paths.h), each rule alone: no links, no threads, the time
// passed in. The failover link's own tests (failover_link_test.cc) run the same rules
// through real cancels, resumes and reconnections.
#include "transport/pair_paths.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace tributary::transport {
namespace {

using std::chrono::milliseconds;
using Verdict = PairPaths::Failure::Verdict;
using Resume = PairPaths::Resume;

constexpr Duration kProbe = milliseconds(100);
const TimePoint kStart = TimePoint{} + std::chrono::hours(1);

PairPaths three_paths() { return PairPaths({true, true, true}, kStart); }

// Moves the pair as the link does: decide, then enter.
void move(PairPaths& p, const PairPaths::Failure& f, TimePoint now = kStart) {
  ASSERT_EQ(f.verdict, Verdict::kMove);
  p.enter(f.to, f.generation, now);
}

TEST(PairPaths, StartsOnTheFirstCarriedPathInGenerationZero) {
  PairPaths p({false, true, true}, kStart);
  EXPECT_EQ(p.current(), 1);
  EXPECT_EQ(p.generation(), 0u);
  EXPECT_EQ(p.state(0), PathState::kAbsent);
  EXPECT_EQ(p.state(1), PathState::kUp);
  EXPECT_EQ(p.state(2), PathState::kUp);
  EXPECT_EQ(p.path_count(), 3);
  EXPECT_EQ(p.carrying(), 2);
}

TEST(PairPaths, ConnectedMeansUpOrStalled) {
  EXPECT_TRUE(connected(PathState::kUp));
  EXPECT_TRUE(connected(PathState::kStalled));
  EXPECT_FALSE(connected(PathState::kDown));
  EXPECT_FALSE(connected(PathState::kAbsent));
}

TEST(PairPathsDeathTest, NoCarriedPathIsAnError) {
  EXPECT_DEATH(PairPaths({false, false}, kStart), "no path carries the pair");
}

// ---- failures ----

TEST(PairPaths, AnErrorOnTheCurrentPathMovesToTheNextUpPathInANewGeneration) {
  PairPaths p = three_paths();
  const auto f = p.on_failure(0, /*stall=*/false);
  EXPECT_EQ(f.verdict, Verdict::kMove);
  EXPECT_TRUE(f.down);
  EXPECT_EQ(f.to, 1);
  EXPECT_EQ(f.generation, 1u);
  EXPECT_EQ(p.state(0), PathState::kDown);
  // Deciding is not moving: the link leaves the old path first.
  EXPECT_EQ(p.current(), 0);
  EXPECT_EQ(p.generation(), 0u);
  p.enter(f.to, f.generation, kStart);
  EXPECT_EQ(p.current(), 1);
  EXPECT_EQ(p.generation(), 1u);
}

TEST(PairPaths, AStallOfTheCurrentPathKeepsItConnected) {
  PairPaths p = three_paths();
  const auto f = p.on_failure(0, /*stall=*/true);
  EXPECT_EQ(f.verdict, Verdict::kMove);
  EXPECT_FALSE(f.down);
  EXPECT_EQ(p.state(0), PathState::kStalled);
  EXPECT_EQ(f.to, 1);
}

TEST(PairPaths, AFailedStandbyIsOnlyMarkedDownEvenForAStall) {
  PairPaths p = three_paths();
  for (bool stall : {false, true}) {
    PairPaths q = p;
    const auto f = q.on_failure(2, stall);
    EXPECT_EQ(f.verdict, Verdict::kStandby);
    EXPECT_TRUE(f.down);
    EXPECT_EQ(q.state(2), PathState::kDown);
    EXPECT_EQ(q.current(), 0);
    EXPECT_EQ(q.generation(), 0u);
  }
}

TEST(PairPaths, AFailureOfAPathThatIsNotConnectedIsIgnored) {
  PairPaths p({true, false, true}, kStart);
  EXPECT_EQ(p.on_failure(1, false).verdict, Verdict::kIgnored);  // absent
  EXPECT_EQ(p.state(1), PathState::kAbsent);
  ASSERT_EQ(p.on_failure(2, false).verdict, Verdict::kStandby);
  const auto again = p.on_failure(2, false);  // already down
  EXPECT_EQ(again.verdict, Verdict::kIgnored);
  EXPECT_FALSE(again.down);
}

TEST(PairPaths, AMovePrefersAnUpPathToAStalledOneInListOrder) {
  PairPaths p = three_paths();
  move(p, p.on_failure(0, /*stall=*/true));  // 0 stalled, on 1
  // Path 1 fails: 2 is up, 0 only stalled, although 0 comes first in the list.
  const auto f = p.on_failure(1, false);
  EXPECT_EQ(f.to, 2);
  EXPECT_EQ(f.generation, 2u);
  p.enter(f.to, f.generation, kStart);
  // Path 2 fails too: the stalled path is the last chance.
  const auto last = p.on_failure(2, false);
  EXPECT_EQ(last.verdict, Verdict::kMove);
  EXPECT_EQ(last.to, 0);
  EXPECT_EQ(last.generation, 3u);
}

TEST(PairPaths, AMoveSkipsDownAndAbsentPaths) {
  PairPaths p({true, true, false, true}, kStart);
  ASSERT_EQ(p.on_failure(1, false).verdict, Verdict::kStandby);
  const auto f = p.on_failure(0, false);
  EXPECT_EQ(f.verdict, Verdict::kMove);
  EXPECT_EQ(f.to, 3);
}

TEST(PairPaths, ThePairIsLostWhenNoOtherPathIsConnected) {
  PairPaths p({true, true}, kStart);
  ASSERT_EQ(p.on_failure(1, false).verdict, Verdict::kStandby);
  const auto f = p.on_failure(0, false);
  EXPECT_EQ(f.verdict, Verdict::kLost);
  EXPECT_TRUE(f.down);
  EXPECT_EQ(p.state(0), PathState::kDown);

  PairPaths single({true}, kStart);
  const auto stalled = single.on_failure(0, /*stall=*/true);
  EXPECT_EQ(stalled.verdict, Verdict::kLost);
  EXPECT_FALSE(stalled.down);
  EXPECT_EQ(single.state(0), PathState::kStalled);
}

TEST(PairPaths, AStallMayOnlyLeaveForALaterPathThatIsUp) {
  PairPaths p = three_paths();
  EXPECT_TRUE(p.may_leave_for_stall());
  ASSERT_EQ(p.on_failure(1, false).verdict, Verdict::kStandby);
  EXPECT_TRUE(p.may_leave_for_stall());  // 2 is still up
  ASSERT_EQ(p.on_failure(2, false).verdict, Verdict::kStandby);
  EXPECT_FALSE(p.may_leave_for_stall());
  // On the last path, an earlier path that is up does not count: moving back up is the
  // probes' business.
  PairPaths q({true, true}, kStart);
  q.enter(1, 1, kStart);
  EXPECT_FALSE(q.may_leave_for_stall());
}

// ---- the peer's resume ----

TEST(PairPaths, AResumeWhereThePairIsIsAccepted) {
  PairPaths p = three_paths();
  move(p, p.on_failure(0, false));
  EXPECT_EQ(p.on_resume(1, 1), Resume::kAccept);
}

TEST(PairPaths, AResumeOfAnEarlierGenerationIsStale) {
  PairPaths p = three_paths();
  move(p, p.on_failure(0, false));
  move(p, p.on_failure(1, false));  // generation 2 on path 2
  EXPECT_EQ(p.on_resume(1, 1), Resume::kStale);
  EXPECT_EQ(p.on_resume(2, 1), Resume::kStale);
  EXPECT_EQ(p.current(), 2);
}

TEST(PairPaths, InOneGenerationTheSideFurtherDownTheListWins) {
  // Both sides moved at once into generation 1: this side to path 1, the peer to path 2.
  PairPaths p = three_paths();
  move(p, p.on_failure(0, false));
  EXPECT_EQ(p.on_resume(2, 1), Resume::kFollow);
  // The mirror image: this side is further down; the peer will follow it.
  PairPaths q = three_paths();
  ASSERT_EQ(q.on_failure(1, false).verdict, Verdict::kStandby);
  move(q, q.on_failure(0, false));
  ASSERT_EQ(q.current(), 2);
  EXPECT_EQ(q.on_resume(1, 1), Resume::kStale);
}

TEST(PairPaths, AResumeOfALaterGenerationIsFollowed) {
  PairPaths p = three_paths();
  EXPECT_EQ(p.on_resume(1, 1), Resume::kFollow);
  EXPECT_EQ(p.current(), 0);  // following is the link's move; the rule only decides
  p.enter(1, 1, kStart);
  EXPECT_EQ(p.on_resume(1, 1), Resume::kAccept);
  // The peer may move back up in a later generation (its probe was answered).
  EXPECT_EQ(p.on_resume(0, 2), Resume::kFollow);
}

TEST(PairPaths, FollowingThePeerDownTheListMarksTheUpPathsAboveItStalled) {
  PairPaths p({true, true, true, true}, kStart);
  ASSERT_EQ(p.on_failure(1, false).verdict, Verdict::kStandby);  // 1 down
  // The peer left 0 and (whatever it saw of 1 and 2) resumed on 3.
  EXPECT_EQ(p.on_resume(3, 1), Resume::kFollow);
  EXPECT_EQ(p.state(0), PathState::kStalled);
  EXPECT_EQ(p.state(1), PathState::kDown);  // down stays down
  EXPECT_EQ(p.state(2), PathState::kStalled);
  EXPECT_EQ(p.state(3), PathState::kUp);
}

TEST(PairPaths, FollowingThePeerUpTheListDemotesNothing) {
  PairPaths p = three_paths();
  move(p, p.on_failure(0, true));  // on 1, 0 stalled
  EXPECT_EQ(p.on_resume(0, 2), Resume::kFollow);
  EXPECT_EQ(p.state(0), PathState::kStalled);  // enter() makes it up
  EXPECT_EQ(p.state(1), PathState::kUp);
  EXPECT_EQ(p.state(2), PathState::kUp);
  p.enter(0, 2, kStart);
  EXPECT_EQ(p.state(0), PathState::kUp);
}

// ---- probes ----

TEST(PairPaths, ProbesAreDueOncePerIntervalFromTheLastMove) {
  PairPaths p = three_paths();
  EXPECT_FALSE(p.probe_due(kStart, kProbe));
  EXPECT_FALSE(p.probe_due(kStart + kProbe - milliseconds(1), kProbe));
  EXPECT_TRUE(p.probe_due(kStart + kProbe, kProbe));
  p.probed(kStart + kProbe);
  EXPECT_FALSE(p.probe_due(kStart + kProbe + milliseconds(50), kProbe));
  EXPECT_TRUE(p.probe_due(kStart + 2 * kProbe, kProbe));
  // A move starts the clock again.
  const TimePoint later = kStart + 5 * kProbe;
  move(p, p.on_failure(0, true), later);
  EXPECT_FALSE(p.probe_due(later + kProbe / 2, kProbe));
  EXPECT_TRUE(p.probe_due(later + kProbe, kProbe));
}

TEST(PairPaths, OnlyStalledPathsAboveThePairAreProbed) {
  PairPaths p({true, true, true, true}, kStart);
  ASSERT_EQ(p.on_failure(0, false).verdict, Verdict::kMove);  // 0 down
  p.enter(1, 1, kStart);
  move(p, p.on_failure(1, true));  // 1 stalled, on 2
  EXPECT_FALSE(p.wants_probe(0));  // down: reconnection's business
  EXPECT_TRUE(p.wants_probe(1));
  EXPECT_FALSE(p.wants_probe(2));  // the pair's own
  EXPECT_FALSE(p.wants_probe(3));  // below the pair
}

TEST(PairPaths, AnAnsweredProbeMovesThePairBackUp) {
  PairPaths p = three_paths();
  move(p, p.on_failure(0, true));  // generation 1, on 1
  EXPECT_TRUE(p.on_probe_answer(0, 1));
  EXPECT_EQ(p.state(0), PathState::kUp);
  // The link moves up in generation + 1.
  p.enter(0, p.generation() + 1, kStart);
  EXPECT_EQ(p.current(), 0);
  EXPECT_EQ(p.generation(), 2u);
}

TEST(PairPaths, AProbeAnswerOfAnotherGenerationOrAPathNotProbedChangesNothing) {
  PairPaths p = three_paths();
  move(p, p.on_failure(0, true));         // generation 1, on 1, 0 stalled
  EXPECT_FALSE(p.on_probe_answer(0, 0));  // an answer to a probe of an earlier stint
  EXPECT_FALSE(p.on_probe_answer(0, 2));
  EXPECT_EQ(p.state(0), PathState::kStalled);
  EXPECT_FALSE(p.on_probe_answer(2, 1));  // below the pair
  EXPECT_EQ(p.state(2), PathState::kUp);
  EXPECT_FALSE(p.on_probe_answer(1, 1));  // the pair's own
}

// ---- reconnections ----

TEST(PairPaths, AReconnectedPathAboveThePairComesBackStalledAndIsProbedAtOnce) {
  PairPaths p = three_paths();
  const TimePoint t = kStart + milliseconds(10);
  move(p, p.on_failure(0, false), t);  // 0 down, on 1
  ASSERT_FALSE(p.probe_due(t, kProbe));
  const TimePoint back = t + milliseconds(5);
  EXPECT_TRUE(p.on_reconnected(0, back, kProbe));
  EXPECT_EQ(p.state(0), PathState::kStalled);
  EXPECT_TRUE(p.wants_probe(0));
  EXPECT_TRUE(p.probe_due(back, kProbe));
}

TEST(PairPaths, AReconnectedPathBelowThePairComesBackUp) {
  PairPaths p = three_paths();
  ASSERT_EQ(p.on_failure(2, false).verdict, Verdict::kStandby);
  EXPECT_TRUE(p.on_reconnected(2, kStart, kProbe));
  EXPECT_EQ(p.state(2), PathState::kUp);
  EXPECT_FALSE(p.wants_probe(2));
}

TEST(PairPaths, OnlyADownPathTakesAReconnection) {
  PairPaths p({true, true, false}, kStart);
  move(p, p.on_failure(0, true));  // 0 stalled
  EXPECT_FALSE(p.on_reconnected(0, kStart, kProbe));
  EXPECT_EQ(p.state(0), PathState::kStalled);
  EXPECT_FALSE(p.on_reconnected(1, kStart, kProbe));  // up
  EXPECT_FALSE(p.on_reconnected(2, kStart, kProbe));  // absent
  EXPECT_EQ(p.state(2), PathState::kAbsent);
}

TEST(PairPaths, APairIsStrandedWhenNoPathIsConnectedAndAnyReconnectionIsItsWayOn) {
  PairPaths p = three_paths();
  EXPECT_FALSE(p.stranded());
  move(p, p.on_failure(0, false));  // 0 down, on 1
  ASSERT_EQ(p.on_failure(2, false).verdict, Verdict::kStandby);
  EXPECT_FALSE(p.stranded());
  ASSERT_EQ(p.on_failure(1, false).verdict, Verdict::kLost);
  EXPECT_TRUE(p.stranded());
  // Path 0 is above the pair's path 1, but the only way on: up, not stalled.
  EXPECT_TRUE(p.on_reconnected(0, kStart, kProbe));
  EXPECT_EQ(p.state(0), PathState::kUp);
  EXPECT_FALSE(p.stranded());
  // A stalled path is still connected: a pair that has one is not stranded.
  PairPaths q({true, true}, kStart);
  ASSERT_EQ(q.on_failure(0, /*stall=*/true).verdict, Verdict::kMove);
  q.enter(1, 1, kStart);
  ASSERT_EQ(q.on_failure(1, false).verdict, Verdict::kMove);  // the stalled one: last chance
  EXPECT_FALSE(q.stranded());
}

TEST(PairPaths, ALostPairComesBackThroughAReconnectionOfItsPath) {
  PairPaths p({true}, kStart);
  ASSERT_EQ(p.on_failure(0, false).verdict, Verdict::kLost);
  EXPECT_TRUE(p.on_reconnected(0, kStart, kProbe));
  EXPECT_EQ(p.state(0), PathState::kUp);  // the pair's own path: not above it
}

}  // namespace
}  // namespace tributary::transport
