// Federated rounds at the coordinator (membership/federated_rounds.h): the pure round logic
// on a FakeClock, one test per rule of its header.
#include "membership/federated_rounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "membership/commit_rule.h"

namespace tributary::membership {
namespace {

using std::chrono::milliseconds;

// A view of ids 10, 20, 30, ... at ranks 0, 1, 2, ... in `epoch`.
View view_of(int n, Epoch epoch = 1) {
  View v;
  v.epoch = epoch;
  for (int i = 0; i < n; ++i) {
    ViewMember m;
    m.id = static_cast<MemberId>(10 * (i + 1));
    m.rank = static_cast<std::uint32_t>(i);
    v.members.push_back(m);
    v.ring.push_back(static_cast<std::uint32_t>(i));
  }
  return v;
}

RoundReady ready_of(MemberId id, std::uint64_t round, double weight, Epoch epoch = 1,
                    milliseconds deadline = milliseconds(1000), std::uint32_t min = 1) {
  RoundReady r;
  r.member = id;
  r.epoch = epoch;
  r.round = round;
  r.weight = weight;
  r.deadline = deadline;
  r.min_participants = min;
  return r;
}

std::vector<RoundContributor> contributors(std::initializer_list<RoundContributor> list) {
  return list;
}

TEST(FederatedRounds, OpensAtTheFirstReadyAndClosesWhenEveryMemberIsReady) {
  FakeClock clock;
  FederatedRounds rounds;
  const View v = view_of(3);
  auto out = rounds.ready(ready_of(20, 7, 2.0), v, clock.now());
  EXPECT_TRUE(out.decided.empty());
  EXPECT_EQ(rounds.next_deadline(), clock.now() + milliseconds(1000));
  clock.advance(milliseconds(10));
  EXPECT_TRUE(rounds.ready(ready_of(30, 7, 3.0), v, clock.now()).decided.empty());
  out = rounds.ready(ready_of(10, 7, 1.0), v, clock.now());
  ASSERT_EQ(out.decided.size(), 1u);
  const RoundDecision& d = out.decided[0];
  EXPECT_FALSE(d.failed);
  EXPECT_EQ(d.epoch, 1u);
  EXPECT_EQ(d.round, 7u);
  EXPECT_EQ(d.members, 3u);
  // By rank, with each member's weight.
  EXPECT_EQ(d.contributors, contributors({{10, 1.0}, {20, 2.0}, {30, 3.0}}));
  EXPECT_EQ(d.total_weight(), 6.0);
  EXPECT_EQ(rounds.next_deadline(), TimePoint::max());
}

TEST(FederatedRounds, ClosesAtTheDeadlineWithTheMembersReadyByThen) {
  FakeClock clock;
  FederatedRounds rounds;
  const View v = view_of(4);
  (void)rounds.ready(ready_of(40, 1, 4.0, 1, milliseconds(500)), v, clock.now());
  clock.advance(milliseconds(200));
  (void)rounds.ready(ready_of(10, 1, 1.0), v, clock.now());  // the opener's deadline rules
  clock.advance(milliseconds(299));
  EXPECT_TRUE(rounds.tick(v, clock.now()).decided.empty());
  clock.advance(milliseconds(1));
  auto out = rounds.tick(v, clock.now());
  ASSERT_EQ(out.decided.size(), 1u);
  EXPECT_EQ(out.decided[0].contributors, contributors({{10, 1.0}, {40, 4.0}}));
  EXPECT_EQ(out.late, 2u) << "members 20 and 30";
  EXPECT_FALSE(out.decided[0].contributed(20));
  // A late member is answered at once with the stored decision, not broadcast again.
  out = rounds.ready(ready_of(20, 1, 2.0), v, clock.now());
  EXPECT_TRUE(out.decided.empty());
  ASSERT_EQ(out.replies.size(), 1u);
  EXPECT_EQ(out.replies[0].first, 20u);
  EXPECT_EQ(out.replies[0].second.contributors, contributors({{10, 1.0}, {40, 4.0}}));
  EXPECT_TRUE(out.replies[0].second.answers(20, 1));
  EXPECT_TRUE(out.replies[0].second.answers(20, 5)) << "late is final, whatever the epoch";
}

TEST(FederatedRounds, BelowMinParticipantsTheRoundFailsForEveryone) {
  FakeClock clock;
  FederatedRounds rounds;
  const View v = view_of(4);
  (void)rounds.ready(ready_of(10, 3, 1.0, 1, milliseconds(100), 3), v, clock.now());
  (void)rounds.ready(ready_of(30, 3, 1.0, 1, milliseconds(100), 3), v, clock.now());
  clock.advance(milliseconds(100));
  auto out = rounds.tick(v, clock.now());
  ASSERT_EQ(out.decided.size(), 1u);
  EXPECT_TRUE(out.decided[0].failed);
  EXPECT_TRUE(out.decided[0].contributors.empty());
  EXPECT_EQ(out.decided[0].reason,
            "round 3: 2 of 4 members contributed by the deadline, fewer than min_participants 3");
  // Final: a contributor's RoundDone commits nothing, a late RoundReady gets the failure.
  EXPECT_TRUE(rounds.done(10, 1, 3).committed.empty());
  out = rounds.ready(ready_of(20, 3, 1.0), v, clock.now());
  ASSERT_EQ(out.replies.size(), 1u);
  EXPECT_TRUE(out.replies[0].second.failed);
}

TEST(FederatedRounds, CommitsOnlyWhenEveryContributorHoldsTheResult) {
  FakeClock clock;
  FederatedRounds rounds;
  const View v = view_of(3);
  (void)rounds.ready(ready_of(10, 5, 1.0, 1, milliseconds(50)), v, clock.now());
  (void)rounds.ready(ready_of(20, 5, 1.0), v, clock.now());
  clock.advance(milliseconds(50));
  ASSERT_EQ(rounds.tick(v, clock.now()).decided.size(), 1u);
  EXPECT_TRUE(rounds.done(30, 1, 5).committed.empty()) << "30 is no contributor";
  EXPECT_TRUE(rounds.done(10, 2, 5).committed.empty()) << "another epoch";
  EXPECT_TRUE(rounds.done(10, 1, 5).committed.empty());
  EXPECT_TRUE(rounds.done(10, 1, 5).committed.empty()) << "a repeat counts once";
  auto out = rounds.done(20, 1, 5);
  ASSERT_EQ(out.committed.size(), 1u);
  EXPECT_EQ(out.committed[0].recipients, (std::vector<MemberId>{10, 20}));
  ASSERT_NE(rounds.decision(5), nullptr);
  EXPECT_TRUE(rounds.decision(5)->committed);
  // A repeated RoundDone after the commit (the commit was lost) gets it again, alone.
  out = rounds.done(10, 1, 5);
  ASSERT_EQ(out.committed.size(), 1u);
  EXPECT_EQ(out.committed[0].recipients, (std::vector<MemberId>{10}));
  // A view change leaves a committed round alone.
  EXPECT_TRUE(rounds.on_view(view_of(2, 2), clock.now()).decided.empty());
}

TEST(FederatedRounds, ANewEpochDecidesAnUncommittedRoundAgainWithItsSurvivors) {
  FakeClock clock;
  FederatedRounds rounds;
  const View v1 = view_of(4);
  for (MemberId id : {10, 20, 30}) (void)rounds.ready(ready_of(id, 9, double(id)), v1, clock.now());
  clock.advance(milliseconds(1000));
  ASSERT_EQ(rounds.tick(v1, clock.now()).decided.size(), 1u);
  (void)rounds.done(10, 1, 9);
  // Member 20 dies: the new view has 10, 30, 40 (40 was late).
  View v2 = view_of(4, 2);
  v2.members.erase(v2.members.begin() + 1);
  v2.ring.pop_back();
  for (std::uint32_t i = 0; i < v2.members.size(); ++i) v2.members[i].rank = i;
  auto out = rounds.on_view(v2, clock.now());
  ASSERT_EQ(out.decided.size(), 1u);
  EXPECT_EQ(out.decided[0].epoch, 2u);
  EXPECT_EQ(out.decided[0].contributors, contributors({{10, 10.0}, {30, 30.0}}));
  EXPECT_EQ(out.late, 0u) << "a re-decision makes nobody late";
  // The old epoch's RoundDone no longer counts; the new epoch's do.
  EXPECT_TRUE(rounds.done(30, 1, 9).committed.empty());
  EXPECT_TRUE(rounds.done(10, 2, 9).committed.empty());
  EXPECT_EQ(rounds.done(30, 2, 9).committed.size(), 1u);
  // A contributor asking again in the new epoch is answered; the late one stays late.
  EXPECT_TRUE(rounds.decision(9)->answers(10, 2));
  EXPECT_FALSE(rounds.decision(9)->contributed(40));
}

TEST(FederatedRounds, AReDecisionBelowMinParticipantsFails) {
  FakeClock clock;
  FederatedRounds rounds;
  const View v1 = view_of(3);
  for (MemberId id : {10, 20, 30}) {
    (void)rounds.ready(ready_of(id, 2, 1.0, 1, milliseconds(100), 3), v1, clock.now());
  }
  View v2 = view_of(2, 2);
  auto out = rounds.on_view(v2, clock.now());
  ASSERT_EQ(out.decided.size(), 1u);
  EXPECT_TRUE(out.decided[0].failed);
  EXPECT_NE(out.decided[0].reason.find("round 2: 2 of 2 members"), std::string::npos)
      << out.decided[0].reason;
}

TEST(FederatedRounds, AnOpenRoundKeepsItsSurvivorsAndItsClockAcrossAViewChange) {
  FakeClock clock;
  FederatedRounds rounds;
  (void)rounds.ready(ready_of(10, 4, 1.0, 1, milliseconds(300)), view_of(3), clock.now());
  (void)rounds.ready(ready_of(30, 4, 3.0), view_of(3), clock.now());
  clock.advance(milliseconds(100));
  // 30 is gone in epoch 2; 10's readiness carries over.
  const View v2 = view_of(2, 2);
  EXPECT_TRUE(rounds.on_view(v2, clock.now()).decided.empty());
  // A RoundReady of the old epoch is not counted (the member adopts the view, asks again).
  EXPECT_TRUE(rounds.ready(ready_of(20, 4, 2.0, 1), v2, clock.now()).decided.empty());
  EXPECT_EQ(rounds.next_deadline(), TimePoint{} + milliseconds(300));
  clock.advance(milliseconds(200));
  auto out = rounds.tick(v2, clock.now());
  ASSERT_EQ(out.decided.size(), 1u);
  EXPECT_EQ(out.decided[0].epoch, 2u);
  EXPECT_EQ(out.decided[0].contributors, contributors({{10, 1.0}}));
}

TEST(FederatedRounds, RefusesClaimsNoHonestMemberMakes) {
  FakeClock clock;
  FederatedRounds rounds;
  const View v = view_of(2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double w : {0.0, -1.0, nan, inf, 2e15}) {
    auto out = rounds.ready(ready_of(10, 1, w), v, clock.now());
    EXPECT_EQ(out.refused.size(), 1u) << w;
  }
  EXPECT_EQ(rounds.ready(ready_of(10, 1, 1, 1, milliseconds(0)), v, clock.now()).refused.size(), 1u);
  EXPECT_EQ(rounds.ready(ready_of(10, 1, 1, 1, milliseconds(1000), 0), v, clock.now()).refused.size(),
            1u);
  EXPECT_EQ(rounds.ready(ready_of(10, kSeqLimit, 1), v, clock.now()).refused.size(), 1u);
  EXPECT_EQ(rounds.ready(ready_of(99, 1, 1), v, clock.now()).refused.size(), 1u) << "not in view";
  EXPECT_EQ(rounds.size(), 0u) << "nothing was opened";
}

TEST(FederatedRounds, KeepsTheLastRoundsAndAnswersOlderOnesAsForgotten) {
  FakeClock clock;
  FederatedRounds rounds(4);
  const View v = view_of(1);
  for (std::uint64_t r = 1; r <= 10; ++r) {
    ASSERT_EQ(rounds.ready(ready_of(10, r, 1.0), v, clock.now()).decided.size(), 1u);
  }
  EXPECT_EQ(rounds.size(), 4u);
  EXPECT_EQ(rounds.decision(6), nullptr);
  ASSERT_NE(rounds.decision(7), nullptr);
  auto out = rounds.ready(ready_of(10, 3, 1.0), v, clock.now());
  ASSERT_EQ(out.replies.size(), 1u);
  EXPECT_TRUE(out.replies[0].second.failed);
  EXPECT_NE(out.replies[0].second.reason.find("older than the last 4 rounds"), std::string::npos);
}

TEST(FederatedRounds, ManySeedsTheDecisionIsExactlyTheReadyMembersByTheDeadline) {
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    std::srand(seed);
    FakeClock clock;
    FederatedRounds rounds;
    const int n = 2 + static_cast<int>(seed % 6);
    const View v = view_of(n);
    std::vector<int> arrival(static_cast<std::size_t>(n));
    for (auto& a : arrival) a = std::rand() % 2000;  // ms after 0; deadline 1000 from the first
    const int first = *std::min_element(arrival.begin(), arrival.end());
    std::vector<RoundContributor> expected;
    std::vector<std::pair<int, int>> order;  // (arrival, rank)
    for (int r = 0; r < n; ++r) order.emplace_back(arrival[static_cast<std::size_t>(r)], r);
    std::sort(order.begin(), order.end());
    std::optional<RoundDecision> decided;
    for (auto [at, r] : order) {
      clock.set(TimePoint{} + milliseconds(at));
      auto out = rounds.tick(v, clock.now());
      if (!out.decided.empty()) decided = out.decided[0];
      const MemberId id = v.members[static_cast<std::size_t>(r)].id;
      out = rounds.ready(ready_of(id, 1, 1.0 + r), v, clock.now());
      if (!out.decided.empty()) decided = out.decided[0];
      if (!decided) continue;
      if (!out.replies.empty()) EXPECT_FALSE(out.replies[0].second.contributed(id));
    }
    (void)first;
    if (!decided) {
      clock.advance(milliseconds(5000));
      auto out = rounds.tick(v, clock.now());
      ASSERT_EQ(out.decided.size(), 1u);
      decided = out.decided[0];
    }
    for (int r = 0; r < n; ++r) {
      if (arrival[static_cast<std::size_t>(r)] < first + 1000) {
        expected.push_back({v.members[static_cast<std::size_t>(r)].id, 1.0 + r});
      }
    }
    EXPECT_EQ(decided->contributors, expected) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tributary::membership
