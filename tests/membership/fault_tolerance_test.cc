// The fault-tolerance rules of the pure membership state machine (docs/fault-tolerance.md):
// Ready/Go and the commit rule, step boundaries, failure confirmation, straggler policy,
// restart and resume. FakeClock only: no sockets, no sleeps.
#include <gtest/gtest.h>

#include <optional>

#include "membership/commit_rule.h"
#include "membership/membership.h"
#include "membership/straggler_policy.h"
#include "tests/membership/cluster.h"

namespace tributary::membership {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Cluster;
using testing::config;
using testing::labels;

// --- commit rule ----------------------------------------------------------------------

TEST(CommitRule, CasesFromTheProtocolDoc) {
  using R = ReadyReport;
  // Everyone committed S on the fast path.
  EXPECT_EQ(commit_through(std::vector<R>{{2, 1, 7, 0}, {2, 1, 7, 0}}), 7u);
  // Some committed S, the others hold it: S.
  EXPECT_EQ(commit_through(std::vector<R>{{2, 1, 7, 0}, {2, 1, 6, 7}, {2, 1, 6, 7}}), 7u);
  // Everyone holds S: S (nobody can have discarded it).
  EXPECT_EQ(commit_through(std::vector<R>{{2, 1, 6, 7}, {2, 1, 6, 7}}), 7u);
  // One survivor does not hold S: S is re-run, commit through S-1.
  EXPECT_EQ(commit_through(std::vector<R>{{2, 1, 6, 7}, {2, 1, 6, 0}}), 6u);
  // Nobody holds anything.
  EXPECT_EQ(commit_through(std::vector<R>{{2, 1, 6, 0}, {2, 1, 6, 0}}), 6u);
  // A stale held seq below what was committed changes nothing.
  EXPECT_EQ(commit_through(std::vector<R>{{2, 1, 9, 4}, {2, 1, 9, 0}}), 9u);
  EXPECT_EQ(commit_through(std::vector<R>{}), 0u);
}

// --- Ready / Go -----------------------------------------------------------------------

TEST(ReadyGo, GoOnlyOnceEveryMemberIsReadyWithCommitThrough) {
  Cluster c(3);
  c.m.remove(c.ids[2], RemovalReason::kHeartbeatTimeout, c.clock.now());  // epoch 2: ids 0, 1
  ASSERT_EQ(c.m.epoch(), 2u);
  Decisions d = c.m.ready(c.ids[0], {2, 1, 6, 7}, c.clock.now());
  EXPECT_FALSE(d.go) << "member 1 is not Ready yet";
  EXPECT_TRUE(c.m.ready(c.ids[0], {1, 0, 6, 7}, c.clock.now()).empty())
      << "Ready for an old epoch is ignored";
  d = c.m.ready(c.ids[1], {2, 1, 7, 0}, c.clock.now());
  ASSERT_TRUE(d.go);
  EXPECT_EQ(d.go->epoch, 2u);
  EXPECT_EQ(d.go->commit_through, 7u);
  EXPECT_TRUE(d.go->joiners.empty());
  EXPECT_EQ(d.go->state_source, c.m.view().members[0].id);
  EXPECT_EQ(d.go->recipients.size(), 2u);
  EXPECT_EQ(c.m.started_epoch(), 2u);
  // A repeated Ready gets the same Go, to itself only.
  d = c.m.ready(c.ids[0], {2, 1, 6, 7}, c.clock.now());
  ASSERT_TRUE(d.go);
  EXPECT_EQ(d.go->commit_through, 7u);
  EXPECT_EQ(d.go->recipients, std::vector<MemberId>{c.ids[0]});
}

TEST(ReadyGo, FirstViewHasNoJoinersAndNoStateSource) {
  Cluster c(2);
  // Cluster's constructor ran the round; check what it decided via a repeat.
  Decisions d = c.m.ready(c.ids[0], {1, 0, 0, 0}, c.clock.now());
  ASSERT_TRUE(d.go);
  EXPECT_TRUE(d.go->joiners.empty());
  EXPECT_EQ(d.go->state_source, 0u);
  EXPECT_EQ(d.go->commit_through, 0u);
}

TEST(ReadyGo, SilentMemberIsRemovedAfterReadyTimeoutAndTheRoundRepeats) {
  Cluster c(3);
  c.m.boundary(c.ids[0], 1, false, c.clock.now());
  c.m.boundary(c.ids[1], 1, false, c.clock.now());
  ASSERT_TRUE(c.m.boundary(c.ids[2], 1, false, c.clock.now()).new_view);  // epoch 2
  c.m.ready(c.ids[0], {2, 1, 5, 0}, c.clock.now());
  c.m.ready(c.ids[1], {2, 1, 5, 0}, c.clock.now());
  c.clock.advance(milliseconds(1999));
  c.heartbeat_all_but(0);
  EXPECT_TRUE(c.m.tick(c.clock.now()).empty());
  EXPECT_LE(c.m.next_expiry(), c.clock.now() + milliseconds(2));
  c.clock.advance(milliseconds(2));
  Decisions d = c.m.tick(c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[2]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kReadyTimeout);
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.new_view->epoch, 3u);
  EXPECT_EQ(d.cause, ViewCause::kFailure);
  // The new round: reports about the last *started* epoch (1) still count.
  c.m.ready(c.ids[0], {3, 1, 5, 6}, c.clock.now());
  d = c.m.ready(c.ids[1], {3, 1, 5, 6}, c.clock.now());
  ASSERT_TRUE(d.go);
  EXPECT_EQ(d.go->commit_through, 6u);
}

TEST(ReadyGo, ReadyTimeoutAppliesOnlyOnceSomebodyWaitsForGo) {
  Cluster c(2);
  c.m.boundary(c.ids[0], 1, false, c.clock.now());
  ASSERT_TRUE(c.m.boundary(c.ids[1], 1, false, c.clock.now()).new_view);  // epoch 2, nobody Ready
  c.clock.advance(milliseconds(2500));
  c.heartbeat_all_but(0);
  EXPECT_TRUE(c.m.tick(c.clock.now()).empty()) << "nobody waits for Go: nobody is removed";
  EXPECT_GT(c.m.next_expiry(), c.clock.now()) << "and the service loop does not spin";
  c.m.ready(c.ids[0], {2, 1, 0, 0}, c.clock.now());
  Decisions d = c.m.tick(c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[1]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kReadyTimeout);
}

// --- step boundaries ------------------------------------------------------------------

TEST(Boundary, LeaversOutJoinersInOneView) {
  Cluster c(3);
  const MemberId j1 = c.m.join(labels("j1"), c.clock.now())->id;
  const MemberId j2 = c.m.join(labels("j2"), c.clock.now())->id;
  EXPECT_TRUE(c.m.joiners_pending());
  EXPECT_TRUE(c.m.heartbeat(c.ids[0], 1, 0, c.clock.now()).joiners_pending);
  EXPECT_EQ(c.m.epoch(), 1u) << "joiners wait";
  EXPECT_TRUE(c.m.boundary(c.ids[0], 1, false, c.clock.now()).empty());
  EXPECT_TRUE(c.m.boundary(c.ids[1], 1, true, c.clock.now()).empty());
  EXPECT_TRUE(c.m.boundary(c.ids[1], 0, false, c.clock.now()).empty()) << "old epoch: ignored";
  Decisions d = c.m.boundary(c.ids[2], 1, false, c.clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.cause, ViewCause::kBoundary);
  EXPECT_EQ(d.new_view->epoch, 2u);
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[1]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kLeft);
  EXPECT_EQ(d.new_view->size(), 4u);
  EXPECT_TRUE(d.new_view->contains(j1));
  EXPECT_TRUE(d.new_view->contains(j2));
  EXPECT_FALSE(d.new_view->contains(c.ids[1]));
  EXPECT_FALSE(c.m.joiners_pending());
  // Go names the joiners and the lowest-rank survivor as the state source.
  Decisions go = c.all_ready({0, 1, 10, 0});
  ASSERT_TRUE(go.go);
  EXPECT_EQ(go.go->joiners, (std::vector<MemberId>{j1, j2}));
  EXPECT_EQ(go.go->state_source, c.ids[0]);
  EXPECT_EQ(go.go->commit_through, 10u) << "joiners' reports do not count";
}

TEST(Boundary, SilentMembersAreRemovedAfterTheBoundaryTimeout) {
  Cluster c(3);
  const MemberId j = c.m.join(labels("j"), c.clock.now())->id;
  c.m.boundary(c.ids[0], 1, false, c.clock.now());
  c.m.boundary(c.ids[1], 1, false, c.clock.now());
  c.clock.advance(milliseconds(2001));
  c.heartbeat_all_but(0);
  Decisions d = c.m.tick(c.clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.cause, ViewCause::kBoundary);
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[2]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kBoundaryTimeout);
  EXPECT_TRUE(d.new_view->contains(j));
}

TEST(Boundary, FailureViewsDoNotAdmitJoinersButAnEmptyViewDoes) {
  Cluster c(2);
  const MemberId j = c.m.join(labels("j"), c.clock.now())->id;
  Decisions d = c.m.remove(c.ids[0], RemovalReason::kHeartbeatTimeout, c.clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_FALSE(d.new_view->contains(j)) << "joiners wait for a step boundary";
  d = c.m.leave(c.ids[1], c.clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_TRUE(d.new_view->contains(j)) << "nobody is left to reach a boundary: admit";
  // A joiner into an empty view is admitted at once.
  Cluster e(1);
  e.m.leave(e.ids[0], e.clock.now());
  auto r = e.m.join(labels("x"), e.clock.now());
  ASSERT_TRUE(r->decisions.new_view);
  EXPECT_EQ(r->decisions.cause, ViewCause::kJoin);
  EXPECT_TRUE(r->decisions.new_view->contains(r->id));
}

TEST(Boundary, AnEmptiedWorldFormsAgainWithReformWhenEmpty) {
  MembershipConfig cfg = config(0);
  cfg.reform_when_empty = true;
  Cluster c(2, cfg);
  // A joiner during the first world waits for its step boundary, as without the option.
  const MemberId early = c.m.join(labels("early"), c.clock.now())->id;
  EXPECT_FALSE(c.m.forming());
  c.m.leave(c.ids[0], c.clock.now());
  Decisions d = c.m.leave(c.ids[1], c.clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_TRUE(d.new_view->empty()) << "the old world ends; the early joiner is not admitted alone";
  EXPECT_TRUE(c.m.forming());
  // The second joiner completes the new world of 2: one initial view with both.
  auto r = c.m.join(labels("late"), c.clock.now());
  ASSERT_TRUE(r->decisions.new_view);
  EXPECT_EQ(r->decisions.cause, ViewCause::kInitial);
  EXPECT_EQ(r->decisions.new_view->size(), 2u);
  EXPECT_TRUE(r->decisions.new_view->contains(early));
  EXPECT_TRUE(r->decisions.new_view->contains(r->id));
  EXPECT_FALSE(c.m.forming());
}

TEST(Boundary, WithoutReformAnEmptiedWorldAdmitsJoinersOneByOne) {
  Cluster c(2);
  c.m.leave(c.ids[0], c.clock.now());
  c.m.leave(c.ids[1], c.clock.now());
  EXPECT_FALSE(c.m.forming());
  auto r = c.m.join(labels("x"), c.clock.now());
  ASSERT_TRUE(r->decisions.new_view);
  EXPECT_EQ(r->decisions.new_view->size(), 1u);
}

// --- leaving with a returned result ---------------------------------------------------

// A member that returned a small all-reduce without the agreement round may be the only
// holder of it while a peer's attempt failed: its Leave waits while a failure of its
// epoch is being resolved or a view it has not adopted exists; any other Leave goes.
TEST(Leave, AMemberHoldingAReturnedResultWaitsForTheViewThatMayNeedIt) {
  Cluster c(2);
  const LeaveTerms holding{1, true};
  const LeaveTerms plain{1, false};
  EXPECT_EQ(c.m.leave_must_wait(c.ids[1], holding), "") << "nothing is pending";
  c.clock.advance(milliseconds(20));
  c.heartbeat_all_but(0);
  EXPECT_TRUE(c.m.failure_report(c.ids[0], 1, 0, c.clock.now()).removed.empty());
  EXPECT_NE(c.m.leave_must_wait(c.ids[1], holding).find("being resolved"), std::string::npos);
  EXPECT_EQ(c.m.leave_must_wait(c.ids[1], plain), "") << "no result a peer could need";
  EXPECT_EQ(c.m.leave_must_wait(12345, holding), "") << "not a member";
  // Both keep heartbeating: after heartbeat_timeout the report earns a link rebuild.
  Decisions d;
  for (int i = 0; i < 12 && !d.new_view; ++i) {
    c.clock.advance(milliseconds(100));
    c.heartbeat_all_but(0);
    d = c.m.tick(c.clock.now());
  }
  ASSERT_TRUE(d.new_view);
  ASSERT_EQ(d.new_view->epoch, 2u);
  EXPECT_NE(c.m.leave_must_wait(c.ids[1], holding).find("view 2 was issued"), std::string::npos);
  EXPECT_EQ(c.m.leave_must_wait(c.ids[1], LeaveTerms{2, true}), "") << "it adopted view 2";
  d = c.m.leave(c.ids[1], c.clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.new_view->size(), 1u);
}

// --- failure reports ------------------------------------------------------------------

TEST(FailureReport, SilentSuspectIsConfirmedAfterConfirmSilence) {
  Cluster c(3);
  c.clock.advance(milliseconds(200));
  c.heartbeat_all_but(c.ids[2]);  // ids[2] froze at t=0
  Decisions d = c.m.failure_report(c.ids[0], 1, c.ids[2], c.clock.now());
  EXPECT_TRUE(d.removed.empty() && !d.new_view) << "200 ms of silence is not yet 300";
  EXPECT_TRUE(d.probe) << "the report asks every member to heartbeat now";
  EXPECT_EQ(c.m.next_expiry(), TimePoint{} + milliseconds(300) + Duration{1});
  c.clock.advance(milliseconds(101));
  d = c.m.tick(c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[2]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kFailureConfirmed);
  EXPECT_EQ(d.removed[0].reported_by, c.ids[0]) << "who noticed, for the status history";
  EXPECT_EQ(d.removed[0].reporter_name, c.m.find(c.ids[0])->labels.name);
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.cause, ViewCause::kFailure);
  EXPECT_EQ(d.new_view->size(), 2u);
}

TEST(FailureReport, TheFirstReportNamingTheSuspectIsWhoNoticed) {
  Cluster c(4);
  c.clock.advance(milliseconds(100));
  c.heartbeat_all_but(c.ids[3]);
  c.m.failure_report(c.ids[1], 1, 0, c.clock.now());  // names nobody
  c.m.failure_report(c.ids[2], 1, c.ids[3], c.clock.now());
  c.m.failure_report(c.ids[0], 1, c.ids[3], c.clock.now());
  c.clock.advance(milliseconds(250));
  Decisions d = c.m.tick(c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[3]);
  EXPECT_EQ(d.removed[0].reported_by, c.ids[2]) << "a report naming the suspect comes first";
}

TEST(FailureReport, SilenceTheCoordinatorNoticedNamesNoReporter) {
  Cluster c(3);
  c.clock.advance(milliseconds(600));
  c.heartbeat_all_but(c.ids[1]);
  c.clock.advance(milliseconds(500));
  c.heartbeat_all_but(c.ids[1]);
  Decisions d = c.m.tick(c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kHeartbeatTimeout);
  EXPECT_EQ(d.removed[0].reported_by, 0u);
  EXPECT_TRUE(d.removed[0].reporter_name.empty());
}

// A reported member whose control connection its own kernel closed (kill -9 closes every
// socket) is confirmed at once, not after confirm_silence: the report and the close
// together are the evidence, whichever comes first.
TEST(FailureReport, AClosedControlConnectionConfirmsAReportAtOnce) {
  Cluster c(3);
  c.clock.advance(milliseconds(20));
  c.heartbeat_all_but(0);
  Decisions d = c.m.failure_report(c.ids[0], 1, c.ids[2], c.clock.now());
  EXPECT_TRUE(d.removed.empty()) << "heard 0 ms ago: not yet";
  d = c.m.connection_closed(c.ids[2], c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[2]);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kFailureConfirmed);
  EXPECT_EQ(d.removed[0].reported_by, c.ids[0]);
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.new_view->size(), 2u);

  // The close first, then a report naming nobody: at once too.
  Cluster e(3);
  e.clock.advance(milliseconds(20));
  e.heartbeat_all_but(0);
  EXPECT_TRUE(e.m.connection_closed(e.ids[1], e.clock.now()).empty()) << "nobody reported";
  d = e.m.failure_report(e.ids[2], 1, 0, e.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, e.ids[1]);
}

TEST(FailureReport, AClosedConnectionAloneOrHeardFromSinceWaitsAsBefore) {
  Cluster c(3);
  c.clock.advance(milliseconds(20));
  c.heartbeat_all_but(0);
  EXPECT_TRUE(c.m.connection_closed(c.ids[2], c.clock.now()).empty());
  c.clock.advance(milliseconds(900));
  c.heartbeat_all_but(c.ids[2]);
  EXPECT_TRUE(c.m.tick(c.clock.now()).empty()) << "without a report: the heartbeat timeout";
  // It reconnected and heartbeats: a report about it waits for the silence again.
  c.clock.advance(milliseconds(20));
  c.heartbeat_all_but(0);
  Decisions d = c.m.failure_report(c.ids[0], 1, c.ids[2], c.clock.now());
  EXPECT_TRUE(d.removed.empty()) << "heard from after the close";
  EXPECT_TRUE(d.probe);
}

TEST(FailureReport, AlreadySilentSuspectIsConfirmedAtOnce) {
  Cluster c(3);
  c.clock.advance(milliseconds(400));
  c.heartbeat_all_but(c.ids[1]);
  Decisions d = c.m.failure_report(c.ids[2], 1, c.ids[1], c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[1]);
}

TEST(FailureReport, UnknownSuspectConfirmsWhoeverIsSilent) {
  Cluster c(4);
  c.clock.advance(milliseconds(350));
  c.heartbeat_all_but(c.ids[3]);
  Decisions d = c.m.failure_report(c.ids[0], 1, 0, c.clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c.ids[3]);
}

TEST(FailureReport, FalseSuspicionRebuildsLinksWithTheSameMembers) {
  Cluster c(3);
  Decisions first = c.m.failure_report(c.ids[0], 1, c.ids[1], c.clock.now());
  EXPECT_TRUE(first.removed.empty() && !first.new_view && first.probe);
  EXPECT_TRUE(c.m.failure_report(c.ids[0], 7, c.ids[1], c.clock.now()).empty())
      << "other epochs: ignored";
  for (int i = 0; i < 10; ++i) {
    c.clock.advance(milliseconds(100));
    c.heartbeat_all_but(0);
    EXPECT_TRUE(c.m.tick(c.clock.now()).empty())
        << "suspect alive; no confirmation within heartbeat_timeout yet";
  }
  c.clock.advance(milliseconds(1));
  Decisions d = c.m.tick(c.clock.now());
  EXPECT_TRUE(d.removed.empty());
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.cause, ViewCause::kLinkRebuild);
  EXPECT_EQ(d.new_view->epoch, 2u);
  EXPECT_EQ(d.new_view->size(), 3u);
  ASSERT_EQ(d.log.size(), 1u);
  EXPECT_NE(d.log[0].find("not confirmed"), std::string::npos);
}

TEST(FailureReport, ReportsFromNonMembersOrOldEpochsChangeNothing) {
  Cluster c(2);
  c.clock.advance(milliseconds(500));
  EXPECT_TRUE(c.m.failure_report(999, 1, c.ids[0], c.clock.now()).empty());
  EXPECT_TRUE(c.m.failure_report(c.ids[0], 2, c.ids[1], c.clock.now()).empty());
}

// --- straggler policy -----------------------------------------------------------------

TEST(StragglerPolicy, LowerMedianAndVerdicts) {
  EXPECT_EQ(lower_median({}), 0.0);
  EXPECT_EQ(lower_median({3, 1, 2}), 2.0);
  EXPECT_EQ(lower_median({4, 1, 3, 2}), 2.0);
  StragglerConfig sc;
  sc.k = 2;
  sc.floor_seconds = 0.1;
  double median = 0;
  auto v = judge_step(sc, {{1, 0.05}, {2, 0.05}, {3, 0.09}}, &median);
  EXPECT_FALSE(v[2].straggler) << "below the floor";
  v = judge_step(sc, {{1, 1.0}, {2, 1.0}, {3, 2.0}}, &median);
  EXPECT_FALSE(v[2].straggler) << "exactly k x median is not above it";
  v = judge_step(sc, {{1, 1.0}, {2, 1.0}, {3, 2.1}}, &median);
  EXPECT_EQ(median, 1.0);
  EXPECT_TRUE(v[2].straggler);
  EXPECT_FALSE(judge_step(sc, {{1, 9.0}}, nullptr)[0].straggler) << "alone: nobody to lag behind";
  std::deque<bool> h;
  sc.m = 2;
  sc.w = 3;
  for (bool b : {true, false, false, true}) record_verdict(sc, h, b);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_FALSE(should_evict(sc, h));
  record_verdict(sc, h, true);
  EXPECT_TRUE(should_evict(sc, h));
  StragglerConfig bad;
  bad.m = 4;
  bad.w = 3;
  EXPECT_EQ(validate(bad).code(), StatusCode::kInvalidArgument);
}

MembershipConfig straggler_config(std::size_t min_world) {
  MembershipConfig c = config(0);
  c.straggler.enabled = true;
  c.straggler.k = 2;
  c.straggler.floor_seconds = 0.05;
  c.straggler.m = 2;
  c.straggler.w = 3;
  c.straggler.cooldown = seconds(10);
  c.straggler.min_world_size = min_world;
  return c;
}

// One step: everyone 0.1 s except `slow` at `slow_seconds`.
Decisions step(Cluster& c, std::uint64_t s, MemberId slow, double slow_seconds) {
  Decisions d;
  for (const auto& m : c.m.view().members) {
    Decisions x = c.m.step_timing(m.id, s, m.id == slow ? slow_seconds : 0.1, c.clock.now());
    if (!x.empty()) d = x;
  }
  return d;
}

// Every member's first timing after entering the view spans its join: not judged.
void warm_up(Cluster& c) { EXPECT_TRUE(step(c, 0, 0, 0.1).log.empty()); }

TEST(StragglerPolicy, EvictsAfterMOfWStepsThenCooldownRefusesRejoin) {
  Cluster c(4, straggler_config(2));
  const MemberId slow = c.ids[3];
  warm_up(c);
  Decisions d = step(c, 1, slow, 0.5);
  EXPECT_FALSE(d.new_view);
  ASSERT_EQ(d.log.size(), 1u) << "each verdict is logged with the member named";
  EXPECT_NE(d.log[0].find("'m3'"), std::string::npos) << d.log[0];
  EXPECT_FALSE(step(c, 2, slow, 0.15).new_view) << "within k x median: not straggling";
  d = step(c, 3, slow, 0.5);  // 2 of the last 3
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.cause, ViewCause::kStraggler);
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, slow);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kStraggler);
  EXPECT_FALSE(d.new_view->contains(slow));
  auto again = c.m.join(labels("m3"), c.clock.now());
  ASSERT_FALSE(again.is_ok());
  EXPECT_EQ(again.status().code(), StatusCode::kEvicted);
  EXPECT_NE(again.status().message().find("cool-down"), std::string::npos);
  EXPECT_TRUE(c.m.join(labels("other"), c.clock.now()).is_ok()) << "others are not affected";
  c.clock.advance(seconds(10));
  EXPECT_TRUE(c.m.join(labels("m3"), c.clock.now()).is_ok()) << "after the cool-down";
}

TEST(StragglerPolicy, NeverBelowMinWorldSizeAndDisabledDoesNothing) {
  Cluster c(2, straggler_config(2));
  for (std::uint64_t s = 1; s <= 5; ++s) {
    Decisions d = step(c, s, c.ids[1], 1.0);
    EXPECT_FALSE(d.new_view) << "step " << s;
  }
  EXPECT_EQ(c.m.view().size(), 2u);
  MembershipConfig off = straggler_config(1);
  off.straggler.enabled = false;
  Cluster d(3, off);
  for (std::uint64_t s = 1; s <= 5; ++s) EXPECT_TRUE(step(d, s, d.ids[2], 9.0).empty());
}

TEST(StragglerPolicy, AMembersFirstTimingInAViewIsNotJudged) {
  Cluster c(3, straggler_config(1));
  // The newcomer's first interval holds its join (connect, state transfer): 5 s.
  for (MemberId id : c.ids) c.m.step_timing(id, 1, id == c.ids[2] ? 5.0 : 0.1, c.clock.now());
  EXPECT_TRUE(c.m.find(c.ids[2])->lag_history.empty()) << "no strike for joining";
  EXPECT_EQ(c.m.find(c.ids[0])->lag_history.size(), 0u) << "nobody judged in a warm-up step";
  Decisions d = step(c, 2, c.ids[2], 5.0);
  ASSERT_EQ(d.log.size(), 1u) << "from its second step on, it is judged like everyone";
  EXPECT_NE(d.log[0].find("> 2 x median"), std::string::npos) << d.log[0];
}

TEST(StragglerPolicy, OneTimingPerMemberAndStep) {
  Cluster c(3, straggler_config(1));
  warm_up(c);
  const MemberId slow = c.ids[2];
  EXPECT_EQ(step(c, 5, slow, 0.5).log.size(), 1u);
  // The same slow stretch reported again, for the same or an older step: refused, not a
  // second strike.
  for (std::uint64_t s : {5u, 4u}) {
    Decisions again = c.m.step_timing(slow, s, 0.5, c.clock.now());
    ASSERT_EQ(again.refused.size(), 1u);
    EXPECT_NE(again.refused[0].find("reported step 5 already"), std::string::npos)
        << again.refused[0];
  }
  EXPECT_EQ(straggling_steps(c.m.find(slow)->lag_history), 1u);
}

TEST(StragglerPolicy, IncompleteStepsAreNotJudged) {
  Cluster c(3, straggler_config(1));
  for (std::uint64_t s = 1; s <= 4; ++s) {
    c.m.step_timing(c.ids[0], s, 0.1, c.clock.now());
    EXPECT_TRUE(c.m.step_timing(c.ids[2], s, 5.0, c.clock.now()).empty());
  }
  EXPECT_TRUE(c.m.find(c.ids[2])->lag_history.empty());
}

// --- restart and resume ---------------------------------------------------------------

TEST(Resume, ViewOfThoseThatResumedWithALargerEpoch) {
  FakeClock clock;
  MembershipConfig cfg = config(3);
  cfg.last_epoch = 7;
  cfg.last_member_id = 12;
  Membership m(cfg);
  m.restore({{10, labels("a")}, {11, labels("b")}, {12, labels("c")}}, clock.now());
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.resume(99, labels("x"), clock.now()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.resume(10, labels("not-a"), clock.now()).status().code(),
            StatusCode::kInvalidArgument);
  auto r = m.resume(10, labels("a"), clock.now());
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r->decisions.new_view);
  // A joiner meanwhile waits for a boundary; its id continues after the journaled counter.
  auto j = m.join(labels("j"), clock.now());
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(j->id, 13u);
  EXPECT_FALSE(j->decisions.new_view);
  clock.advance(milliseconds(500));
  ASSERT_TRUE(m.resume(11, labels("b"), clock.now()).is_ok());
  m.heartbeat(10, 0, 0, clock.now());
  clock.advance(milliseconds(2501));
  m.heartbeat(10, 0, 0, clock.now());
  m.heartbeat(11, 0, 0, clock.now());
  m.heartbeat(13, 0, 0, clock.now());
  Decisions d = m.tick(clock.now());
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.cause, ViewCause::kResume);
  EXPECT_EQ(d.new_view->epoch, 8u) << "never reissue a journaled epoch";
  EXPECT_EQ(d.new_view->size(), 2u);
  EXPECT_TRUE(d.new_view->contains(10));
  EXPECT_TRUE(d.new_view->contains(11));
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, 12u);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kResumeTimeout);
  // The survivors of the journaled view are the "previous epoch": Go has a state source.
  m.ready(10, {8, 7, 3, 0}, clock.now());
  Decisions go = m.ready(11, {8, 7, 3, 4}, clock.now());
  ASSERT_TRUE(go.go);
  EXPECT_EQ(go.go->commit_through, 3u);
  EXPECT_NE(go.go->state_source, 0u);
}

TEST(Resume, AllBackIssuesTheViewAtOnceAndReconnectChangesNothing) {
  FakeClock clock;
  MembershipConfig cfg = config(1);
  cfg.last_epoch = 3;
  Membership m(cfg);
  m.restore({{1, labels("a")}, {2, labels("b")}}, clock.now());
  EXPECT_FALSE(m.resume(1, labels("a"), clock.now())->decisions.new_view);
  auto r = m.resume(2, labels("b"), clock.now());
  ASSERT_TRUE(r->decisions.new_view);
  EXPECT_EQ(r->decisions.new_view->epoch, 4u);
  EXPECT_EQ(r->decisions.new_view->size(), 2u);
  auto again = m.resume(2, labels("b"), clock.now());
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->decisions.empty()) << "a reconnecting member is simply known again";
}

// The journaled view had admitted a joiner (the leader died after recording the view,
// before its Go): after the restart the joiner is still a joiner, and the Go names it and
// a state source, or it would train from its own, empty state (fault_failover_test saw
// a joiner at step 0 beside members at step 567: every sum differed from the reference).
TEST(Resume, AJoinerOfTheJournaledViewStillGetsTheState) {
  FakeClock clock;
  MembershipConfig cfg = config(1);
  cfg.last_epoch = 3;
  Membership m(cfg);
  m.restore({{1, labels("a")}, {2, labels("b")}, {3, labels("j")}}, clock.now(),
            std::vector<MemberId>{1, 2});
  ASSERT_TRUE(m.resume(1, labels("a"), clock.now()).is_ok());
  ASSERT_TRUE(m.resume(2, labels("b"), clock.now()).is_ok());
  auto r = m.resume(3, labels("j"), clock.now());
  ASSERT_TRUE(r.is_ok());
  ASSERT_TRUE(r->decisions.new_view);
  EXPECT_EQ(m.with_state(*r->decisions.new_view), (std::vector<MemberId>{1, 2}));
  m.ready(1, {4, 3, 9, 0}, clock.now());
  m.ready(2, {4, 3, 9, 0}, clock.now());
  Decisions go = m.ready(3, {4, 0, 0, 0}, clock.now());
  ASSERT_TRUE(go.go);
  EXPECT_EQ(go.go->joiners, (std::vector<MemberId>{3}));
  EXPECT_EQ(go.go->state_source, 1u);
  EXPECT_EQ(go.go->commit_through, 9u) << "the joiner's empty report decides nothing";
  // Once started, every member holds the state.
  EXPECT_EQ(m.with_state(m.view()), (std::vector<MemberId>{1, 2, 3}));
}

// A journal from before with_state was recorded: every member is taken to hold the state.
TEST(Resume, WithoutAWithStateListEveryMemberHoldsTheState) {
  FakeClock clock;
  MembershipConfig cfg = config(1);
  cfg.last_epoch = 3;
  Membership m(cfg);
  m.restore({{1, labels("a")}, {2, labels("b")}}, clock.now());
  ASSERT_TRUE(m.resume(1, labels("a"), clock.now()).is_ok());
  ASSERT_TRUE(m.resume(2, labels("b"), clock.now()).is_ok());
  m.ready(1, {4, 3, 5, 0}, clock.now());
  Decisions go = m.ready(2, {4, 3, 5, 0}, clock.now());
  ASSERT_TRUE(go.go);
  EXPECT_TRUE(go.go->joiners.empty());
  EXPECT_EQ(go.go->state_source, 1u);
}

}  // namespace
}  // namespace tributary::membership
