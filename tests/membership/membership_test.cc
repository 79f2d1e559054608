// The pure membership state machine, driven by a FakeClock: no sockets, no sleeps.
#include "membership/membership.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>

namespace tributary::membership {
namespace {

using std::chrono::milliseconds;

MemberLabels labels(std::string host, std::string zone = "z") {
  return {"m-" + host, host, std::move(zone), host + ":9000", {"tcp"}};
}

// Appending instead of "h" + to_string(i) sidesteps GCC 12's false -Wrestrict (PR105651).
std::string host_n(std::uint64_t i) {
  std::string h = "h";
  h += std::to_string(i);
  return h;
}

MembershipConfig config(std::size_t initial, milliseconds timeout = milliseconds(300)) {
  MembershipConfig c;
  c.initial_world_size = initial;
  c.heartbeat_timeout = timeout;
  return c;
}

MemberId join(Membership& m, MemberLabels l, const FakeClock& clock,
              std::optional<View>* view = nullptr) {
  auto r = m.join(std::move(l), clock.now());
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (view != nullptr) *view = r->decisions.new_view;
  return r->id;
}

// Every member of the current view reaches a step boundary: pending joiners get in.
std::optional<View> boundary_all(Membership& m, const FakeClock& clock) {
  const View v = m.view();
  Decisions d;
  for (const auto& member : v.members) d = m.boundary(member.id, v.epoch, false, clock.now());
  return d.new_view;
}

std::vector<MemberId> ring_ids(const View& v) {
  std::vector<MemberId> ids;
  for (auto rank : v.ring) ids.push_back(v.members[rank].id);
  return ids;
}

void expect_well_formed(const View& v) {
  ASSERT_EQ(v.ring.size(), v.members.size());
  for (std::size_t i = 0; i < v.members.size(); ++i) {
    EXPECT_EQ(v.members[i].rank, i);
    EXPECT_EQ(v.ring[i], i) << "ranks follow the ring order";
  }
}

TEST(Membership, NoViewUntilInitialWorldThenOneView) {
  FakeClock clock;
  Membership m(config(3));
  std::optional<View> v;
  join(m, labels("a"), clock, &v);
  EXPECT_FALSE(v);
  join(m, labels("b"), clock, &v);
  EXPECT_FALSE(v);
  EXPECT_EQ(m.epoch(), 0u);
  EXPECT_EQ(m.peers().begin()->second.phase, PeerPhase::kWaiting);
  join(m, labels("c"), clock, &v);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->epoch, 1u);
  EXPECT_EQ(v->size(), 3u);
  expect_well_formed(*v);
  EXPECT_EQ(m.view(), *v);
  for (const auto& [id, p] : m.peers()) EXPECT_EQ(p.phase, PeerPhase::kInView);
}

TEST(Membership, RanksFollowJoinOrderWithinOneHost) {
  FakeClock clock;
  Membership m(config(3));
  const MemberId a = join(m, labels("h"), clock);
  const MemberId b = join(m, labels("h"), clock);
  const MemberId c = join(m, labels("h"), clock);
  EXPECT_EQ(ring_ids(m.view()), (std::vector<MemberId>{a, b, c}));
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST(Membership, MembersOfOneHostAreAdjacentAndOrderIsStable) {
  FakeClock clock;
  Membership m(config(5));
  const MemberId b1 = join(m, labels("b"), clock);
  const MemberId a1 = join(m, labels("a"), clock);
  const MemberId b2 = join(m, labels("b"), clock);
  const MemberId c1 = join(m, labels("c"), clock);
  const MemberId a2 = join(m, labels("a"), clock);
  expect_well_formed(m.view());
  EXPECT_EQ(ring_ids(m.view()), (std::vector<MemberId>{a1, a2, b1, b2, c1}));
  // A later joiner on host b slots in after b's members; nobody else is reordered.
  const MemberId b3 = join(m, labels("b"), clock);
  ASSERT_TRUE(boundary_all(m, clock));
  EXPECT_EQ(ring_ids(m.view()), (std::vector<MemberId>{a1, a2, b1, b2, b3, c1}));
  EXPECT_EQ(m.view().find(b3)->rank, 4u);
  EXPECT_EQ(m.view().find(c1)->rank, 5u);
}

TEST(Membership, HostsOfOneZoneAreAdjacent) {
  FakeClock clock;
  Membership m(config(4));
  const MemberId x = join(m, labels("a", "east"), clock);
  const MemberId y = join(m, labels("b", "west"), clock);
  const MemberId z = join(m, labels("c", "east"), clock);
  const MemberId w = join(m, labels("d", "west"), clock);
  EXPECT_EQ(ring_ids(m.view()), (std::vector<MemberId>{x, z, y, w}));
}

TEST(Membership, ViewCarriesLabels) {
  FakeClock clock;
  Membership m(config(1));
  MemberLabels l{"worker-0", "host-0", "zone-0", "10.0.0.1:7000", {"tcp", "shm"}};
  const MemberId id = join(m, l, clock);
  const ViewMember* vm = m.view().find(id);
  ASSERT_NE(vm, nullptr);
  EXPECT_EQ(vm->host, "host-0");
  EXPECT_EQ(vm->zone, "zone-0");
  EXPECT_EQ(vm->data_address, "10.0.0.1:7000");
  EXPECT_EQ(vm->capabilities, (std::vector<std::string>{"tcp", "shm"}));
}

TEST(Membership, JoinAfterFirstViewWaitsForAStepBoundary) {
  FakeClock clock;
  Membership m(config(2));
  join(m, labels("a"), clock);
  join(m, labels("b"), clock);
  ASSERT_EQ(m.epoch(), 1u);
  std::optional<View> v;
  const MemberId c = join(m, labels("c"), clock, &v);
  EXPECT_FALSE(v) << "joiners after the first view wait for a step boundary";
  EXPECT_EQ(m.find(c)->phase, PeerPhase::kPending);
  EXPECT_TRUE(m.joiners_pending());
  v = boundary_all(m, clock);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->epoch, 2u);
  EXPECT_TRUE(v->contains(c));
  EXPECT_EQ(v->size(), 3u);
  EXPECT_FALSE(v->leaves_only) << "somebody came";
}

// A setting every member must share (kSharedSettings: TLS on data links): a joiner that
// differs is refused with both values named, before it is a member, so a view holding it
// (whose links would all be refused) never forms; members that agree, and members that do
// not advertise the setting, join as before.
TEST(Membership, AJoinerWhoseTlsDiffersFromTheMembersIsRefused) {
  FakeClock clock;
  Membership m(config(2));
  auto with = [](std::string host, std::string tls) {
    MemberLabels l = labels(std::move(host));
    l.capabilities.push_back(std::move(tls));
    return l;
  };
  join(m, with("a", "tls:all/psk"), clock);
  join(m, with("b", "tls:all/psk"), clock);
  ASSERT_EQ(m.epoch(), 1u);
  for (const char* other : {"tls:off", "tls:cross-zone/psk", "tls:all/cert"}) {
    auto refused = m.join(with("c", other), clock.now());
    ASSERT_FALSE(refused.is_ok()) << other;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(other), std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find("tls:all/psk"), std::string::npos)
        << refused.status().message();
  }
  EXPECT_FALSE(m.joiners_pending()) << "a refused joiner is nobody";
  EXPECT_EQ(m.view().size(), 2u);
  join(m, with("d", "tls:all/psk"), clock);
  join(m, labels("e"), clock);  // no setting advertised: not compared
  EXPECT_TRUE(m.joiners_pending());
  const auto v = boundary_all(m, clock);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->size(), 4u);
}

// joiners_pending() is a count kept by every phase change (it answers every heartbeat):
// a pending joiner that dies before the boundary, one admitted by it, one admitted into an
// empty view.
TEST(Membership, JoinersPendingFollowsEveryWayOutOfPending) {
  FakeClock clock;
  Membership m(config(1, milliseconds(300)));
  const MemberId a = join(m, labels("a"), clock);
  const MemberId b = join(m, labels("b"), clock);
  EXPECT_TRUE(m.joiners_pending());
  clock.advance(milliseconds(200));
  (void)m.heartbeat(a, m.epoch(), 0, clock.now());
  clock.advance(milliseconds(200));
  const Decisions gone = m.tick(clock.now());  // b never heartbeated: removed while pending
  ASSERT_EQ(gone.removed.size(), 1u);
  EXPECT_EQ(gone.removed.front().id, b);
  EXPECT_FALSE(m.joiners_pending());
  const MemberId c = join(m, labels("c"), clock);
  const MemberId d = join(m, labels("d"), clock);
  EXPECT_TRUE(m.joiners_pending());
  ASSERT_TRUE(boundary_all(m, clock));
  EXPECT_FALSE(m.joiners_pending());
  EXPECT_TRUE(m.view().contains(c) && m.view().contains(d));
  (void)m.leave(a, clock.now());
  (void)m.leave(c, clock.now());
  (void)m.leave(d, clock.now());
  ASSERT_TRUE(m.view().empty());
  join(m, labels("e"), clock);  // an empty view admits at once
  EXPECT_FALSE(m.joiners_pending());
}

TEST(Membership, HeartbeatTimeoutRemovesSilentMemberAndBumpsEpoch) {
  FakeClock clock;
  Membership m(config(3, milliseconds(300)));
  const MemberId a = join(m, labels("a"), clock);
  const MemberId b = join(m, labels("b"), clock);
  const MemberId c = join(m, labels("c"), clock);
  ASSERT_EQ(m.epoch(), 1u);

  clock.advance(milliseconds(200));
  EXPECT_TRUE(m.heartbeat(a, 1, 10, clock.now()).known);
  EXPECT_TRUE(m.heartbeat(b, 1, 10, clock.now()).known);
  EXPECT_TRUE(m.tick(clock.now()).empty());

  clock.advance(milliseconds(200));  // c silent for 400 ms > 300 ms
  Decisions d = m.tick(clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, c);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kHeartbeatTimeout);
  EXPECT_EQ(d.removed[0].name, "m-c");
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.new_view->epoch, 2u);
  EXPECT_EQ(ring_ids(*d.new_view), (std::vector<MemberId>{a, b}));
  expect_well_formed(*d.new_view);
  EXPECT_FALSE(d.new_view->leaves_only) << "a failure, not a leave";
  EXPECT_EQ(m.find(c), nullptr);
  EXPECT_FALSE(m.heartbeat(c, 1, 11, clock.now()).known) << "a removed member stays removed";
}

TEST(Membership, SilenceOfExactlyTheTimeoutIsNotYetFailure) {
  FakeClock clock;
  Membership m(config(1, milliseconds(300)));
  join(m, labels("a"), clock);
  clock.advance(milliseconds(300));
  EXPECT_TRUE(m.tick(clock.now()).empty());
  EXPECT_EQ(m.next_expiry(), clock.now() + Duration{1});
  clock.advance(Duration{1});
  EXPECT_EQ(m.tick(clock.now()).removed.size(), 1u);
}

TEST(Membership, SeveralTimeoutsInOneTickMakeOneView) {
  FakeClock clock;
  Membership m(config(4, milliseconds(100)));
  MemberId keep = 0;
  for (int i = 0; i < 4; ++i) keep = join(m, labels(host_n(static_cast<std::uint64_t>(i))), clock);
  clock.advance(milliseconds(101));
  m.heartbeat(keep, 1, 0, clock.now());
  Decisions d = m.tick(clock.now());
  EXPECT_EQ(d.removed.size(), 3u);
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.new_view->epoch, 2u);
  EXPECT_EQ(ring_ids(*d.new_view), std::vector<MemberId>{keep});
}

TEST(Membership, LeaveIssuesNewViewAndUnknownLeaveIsIgnored) {
  FakeClock clock;
  Membership m(config(2));
  const MemberId a = join(m, labels("a"), clock);
  const MemberId b = join(m, labels("b"), clock);
  Decisions d = m.leave(b, clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].reason, RemovalReason::kLeft);
  ASSERT_TRUE(d.new_view);
  EXPECT_EQ(d.new_view->epoch, 2u);
  EXPECT_EQ(ring_ids(*d.new_view), std::vector<MemberId>{a});
  EXPECT_TRUE(d.new_view->leaves_only) << "the leaver is the only change";
  EXPECT_TRUE(m.view().leaves_only);
  EXPECT_TRUE(m.leave(b, clock.now()).empty());
  EXPECT_TRUE(m.leave(12345, clock.now()).empty());
  EXPECT_EQ(m.epoch(), 2u);
}

TEST(Membership, ViewsContinueBelowInitialWorldOnceStarted) {
  FakeClock clock;
  Membership m(config(2));
  const MemberId a = join(m, labels("a"), clock);
  const MemberId b = join(m, labels("b"), clock);
  EXPECT_TRUE(m.leave(a, clock.now()).new_view);
  Decisions last = m.leave(b, clock.now());
  ASSERT_TRUE(last.new_view);
  EXPECT_TRUE(last.new_view->empty());
  EXPECT_EQ(last.new_view->epoch, 3u);
}

TEST(Membership, WaitingMemberThatGoesSilentIsRemovedWithoutAView) {
  FakeClock clock;
  Membership m(config(2, milliseconds(100)));
  join(m, labels("a"), clock);
  clock.advance(milliseconds(150));
  Decisions d = m.tick(clock.now());
  EXPECT_EQ(d.removed.size(), 1u);
  EXPECT_FALSE(d.new_view);
  EXPECT_EQ(m.size(), 0u);
  // The initial world still needs two live members.
  std::optional<View> v;
  join(m, labels("b"), clock, &v);
  EXPECT_FALSE(v);
  join(m, labels("c"), clock, &v);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->epoch, 1u);
}

TEST(Membership, HeartbeatAsksForViewResendWhenMemberIsBehind) {
  FakeClock clock;
  Membership m(config(2));
  const MemberId a = join(m, labels("a"), clock);
  EXPECT_FALSE(m.heartbeat(a, 0, 0, clock.now()).resend_view)
      << "waiting member: no view to resend";
  join(m, labels("b"), clock);
  join(m, labels("c"), clock);
  ASSERT_TRUE(boundary_all(m, clock));  // epoch 2
  HeartbeatDecision hb = m.heartbeat(a, 1, 7, clock.now());
  EXPECT_TRUE(hb.known);
  EXPECT_EQ(hb.current_epoch, 2u);
  EXPECT_TRUE(hb.resend_view);
  EXPECT_FALSE(m.heartbeat(a, 2, 8, clock.now()).resend_view);
  EXPECT_EQ(m.find(a)->step, 8u);
  EXPECT_EQ(m.find(a)->known_epoch, 2u);
}

// A heartbeat sent before the view's push arrived names the old epoch; it must not get a
// second copy while the push is on its way (at 4,096 members every stale heartbeat
// resending a 170 KB view kept the coordinator behind for good), but a member that did
// miss the push gets the view within kViewResendAfter intervals, and one that
// reconnected gets it at once.
TEST(Membership, ViewResendWaitsForThePushButNotForAReconnect) {
  FakeClock clock;
  MembershipConfig c = config(2, milliseconds(1000));
  c.heartbeat_interval = milliseconds(100);
  Membership m(c);
  const Duration grace = Membership::kViewResendAfter * m.heartbeat_interval();
  const MemberId a = join(m, labels("a"), clock);
  std::optional<View> v;
  join(m, labels("b"), clock, &v);
  ASSERT_TRUE(v);  // epoch 1, pushed to a now
  clock.advance(milliseconds(50));
  EXPECT_FALSE(m.heartbeat(a, 0, 0, clock.now()).resend_view) << "the push is on its way";
  clock.advance(grace - milliseconds(50) - milliseconds(1));
  EXPECT_FALSE(m.heartbeat(a, 0, 0, clock.now()).resend_view);
  clock.advance(milliseconds(1));
  EXPECT_TRUE(m.heartbeat(a, 0, 0, clock.now()).resend_view) << "the push was lost";
  clock.advance(milliseconds(1));
  EXPECT_FALSE(m.heartbeat(a, 0, 0, clock.now()).resend_view) << "the resend is on its way";
  clock.advance(grace);
  EXPECT_TRUE(m.heartbeat(a, 0, 0, clock.now()).resend_view);
  EXPECT_FALSE(m.heartbeat(a, 1, 0, clock.now()).resend_view) << "up to date";

  auto back = m.resume(a, labels("a"), clock.now());  // a reconnect of a view member
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(m.heartbeat(a, 0, 0, clock.now()).resend_view)
      << "what went to the old connection may be lost";
  EXPECT_FALSE(m.heartbeat(a, 0, 0, clock.now()).resend_view);
}

TEST(Membership, AMemberThatCouldNotApplyADeltaGetsTheViewAtOnce) {
  FakeClock clock;
  MembershipConfig c = config(2, milliseconds(1000));
  c.heartbeat_interval = milliseconds(100);
  Membership m(c);
  const MemberId a = join(m, labels("a"), clock);
  join(m, labels("b"), clock);
  ASSERT_EQ(m.epoch(), 1u);  // pushed to a now: a plain stale heartbeat waits for it
  clock.advance(milliseconds(10));
  EXPECT_FALSE(m.heartbeat(a, 0, 0, clock.now()).resend_view);
  EXPECT_TRUE(m.heartbeat(a, 0, 0, clock.now(), /*want_view=*/true).resend_view)
      << "a delta it could not apply: the whole view now";
  EXPECT_FALSE(m.heartbeat(a, 1, 0, clock.now(), true).resend_view) << "up to date: nothing";
  EXPECT_EQ(m.find(a)->known_epoch, 1u);
}

TEST(Membership, AReadyReportsTheEpochTheMemberHolds) {
  FakeClock clock;
  Membership m(config(2, milliseconds(1000)));
  const MemberId a = join(m, labels("a"), clock);
  join(m, labels("b"), clock);
  EXPECT_EQ(m.find(a)->known_epoch, 0u);
  (void)m.ready(a, {1, 0, 0, 0}, clock.now());
  EXPECT_EQ(m.find(a)->known_epoch, 1u) << "the delta base of the next view";
}

TEST(Membership, LateHeartbeatDoesNotMoveLastHeartbeatBack) {
  FakeClock clock;
  Membership m(config(1, milliseconds(100)));
  const MemberId a = join(m, labels("a"), clock);
  const TimePoint early = clock.now();
  clock.advance(milliseconds(80));
  m.heartbeat(a, 1, 0, clock.now());
  m.heartbeat(a, 1, 0, early);
  EXPECT_EQ(m.find(a)->last_heartbeat, clock.now());
}

TEST(Membership, FullMembershipRefusesJoins) {
  FakeClock clock;
  MembershipConfig c = config(1);
  c.max_members = 2;
  Membership m(c);
  join(m, labels("a"), clock);
  join(m, labels("b"), clock);
  auto r = m.join(labels("c"), clock.now());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(m.epoch(), 1u) << "b waits for a step boundary";
}

TEST(Membership, EpochsAndIdsContinueAfterJournaledValues) {
  FakeClock clock;
  MembershipConfig c = config(1);
  c.last_epoch = 41;
  c.last_member_id = 100;
  Membership m(c);
  EXPECT_EQ(join(m, labels("a"), clock), 101u);
  EXPECT_EQ(m.epoch(), 42u);
}

TEST(Membership, NextExpiryIsABoundThatASweepMovesOn) {
  FakeClock clock;
  Membership m(config(2, milliseconds(100)));
  EXPECT_EQ(m.next_expiry(), TimePoint::max());
  const MemberId a = join(m, labels("a"), clock);
  clock.advance(milliseconds(30));
  const MemberId b = join(m, labels("b"), clock);
  EXPECT_EQ(m.next_expiry(), TimePoint{} + milliseconds(100) + Duration{1});
  m.heartbeat(a, 1, 0, clock.now());
  EXPECT_EQ(m.next_expiry(), TimePoint{} + milliseconds(100) + Duration{1})
      << "heartbeats are not looked at one by one: the bound stays until a sweep";
  clock.set(m.next_expiry());
  EXPECT_TRUE(m.tick(clock.now()).empty()) << "a heartbeated at 30 ms: nobody expired";
  EXPECT_EQ(m.next_expiry(), TimePoint{} + milliseconds(130) + Duration{1})
      << "the sweep found the oldest heartbeat (both at 30 ms)";
  m.heartbeat(b, 1, 0, clock.now());
  clock.set(m.next_expiry());
  const Decisions d = m.tick(clock.now());
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].id, a);
  EXPECT_EQ(m.next_expiry(), TimePoint{} + milliseconds(200) + Duration{2})
      << "b heartbeated at 100 ms + 1 ns";
}

// A sweep over random event sequences: whatever happens, epochs only grow (by one per
// view), views are well formed, hosts are contiguous in the ring, and ids are unique.
TEST(Membership, RandomEventsKeepInvariants) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    FakeClock clock;
    Membership m(config(1 + seed % 4, milliseconds(100)));
    Epoch last = 0;
    std::set<MemberId> ever;
    auto check = [&](const std::optional<View>& v) {
      if (!v) return;
      ASSERT_EQ(v->epoch, last + 1) << "seed " << seed;
      last = v->epoch;
      expect_well_formed(*v);
      std::set<std::string> closed;
      for (std::size_t i = 0; i < v->size(); ++i) {
        const std::string& h = v->members[i].host;
        if (i > 0 && v->members[i - 1].host != h) closed.insert(v->members[i - 1].host);
        ASSERT_FALSE(closed.contains(h)) << "host " << h << " split in the ring, seed " << seed;
      }
    };
    for (int step = 0; step < 300; ++step) {
      const int event = static_cast<int>(rng() % 10);
      if (event < 4) {
        auto r = m.join(labels(host_n(rng() % 4)), clock.now());
        ASSERT_TRUE(r.is_ok());
        ASSERT_TRUE(ever.insert(r->id).second) << "id reused";
        check(r->decisions.new_view);
      } else if (event < 6 && m.size() > 0) {
        auto it = m.peers().begin();
        std::advance(it, static_cast<long>(rng() % m.size()));
        check(m.leave(it->first, clock.now()).new_view);
      } else if (event < 9) {
        for (const auto& [id, p] : m.peers()) {
          if (rng() % 3 != 0) m.heartbeat(id, m.epoch(), 0, clock.now());
        }
      } else {
        clock.advance(milliseconds(rng() % 80));
        check(m.tick(clock.now()).new_view);
      }
    }
  }
}

}  // namespace
}  // namespace tributary::membership
