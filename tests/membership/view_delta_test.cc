// Incremental views (membership/view_delta.h) over views the real Membership issues:
// every delta rebuilds the issued view exactly, on the right base only.
#include "membership/view_delta.h"

#include <gtest/gtest.h>

#include <random>

#include "membership/membership.h"

namespace tributary::membership {
namespace {

using std::chrono::milliseconds;

MemberLabels labels(const std::string& host, const std::string& zone) {
  return {"m-" + host, host, zone, host + ":9000", {"tcp"}};
}

MembershipConfig config(std::size_t initial) {
  MembershipConfig c;
  c.initial_world_size = initial;
  c.heartbeat_timeout = std::chrono::seconds(1000);
  c.straggler.enabled = false;
  return c;
}

// A Membership with its issued views in order.
struct Issuer {
  explicit Issuer(std::size_t initial) : m(config(initial)) {}
  MemberId join(const std::string& host, const std::string& zone = "z") {
    auto r = m.join(labels(host, zone), clock.now());
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    take(r->decisions);
    return r->id;
  }
  // Every member of the view asks for the step boundary (`leaving` ones leave with it):
  // pending joiners come in.
  void boundary(const std::vector<MemberId>& leaving = {}) {
    const View v = m.view();
    for (const auto& member : v.members) {
      const bool leaves = std::find(leaving.begin(), leaving.end(), member.id) != leaving.end();
      take(m.boundary(member.id, v.epoch, leaves, clock.now()));
    }
  }
  void remove(MemberId id) { take(m.remove(id, RemovalReason::kFailureConfirmed, clock.now())); }
  void take(const Decisions& d) {
    if (d.new_view) views.push_back(*d.new_view);
  }
  // The last view, rebuilt from the one before it by a delta made and applied.
  void expect_delta_rebuilds_last() {
    ASSERT_GE(views.size(), 2u);
    const View& base = views[views.size() - 2];
    const View& next = views.back();
    auto delta = make_delta(base, next);
    ASSERT_TRUE(delta) << "no delta from epoch " << base.epoch << " to " << next.epoch;
    EXPECT_EQ(delta->base_epoch, base.epoch);
    EXPECT_EQ(delta->epoch, next.epoch);
    auto rebuilt = apply_delta(base, *delta);
    ASSERT_TRUE(rebuilt.is_ok()) << rebuilt.status().to_string();
    EXPECT_EQ(*rebuilt, next);
  }
  FakeClock clock;
  Membership m;
  std::vector<View> views;
};

TEST(ViewDelta, RemovalInTheMiddleShiftsTheRanksAfterIt) {
  Issuer is(5);
  std::vector<MemberId> ids;
  for (const char* h : {"a", "b", "c", "d", "e"}) ids.push_back(is.join(h));
  ASSERT_EQ(is.views.size(), 1u);
  is.remove(ids[2]);
  ASSERT_EQ(is.views.size(), 2u);
  is.expect_delta_rebuilds_last();
  auto delta = make_delta(is.views[0], is.views[1]);
  EXPECT_EQ(delta->removed, std::vector<MemberId>{ids[2]});
  EXPECT_TRUE(delta->added.empty());
  EXPECT_EQ(delta->size, 4u);
}

TEST(ViewDelta, JoinersLandAtTheirRanksAmongTheSurvivors) {
  Issuer is(3);
  for (const char* h : {"a", "c", "e"}) is.join(h);
  const MemberId b = is.join("b");  // pending: sorts between a and c
  const MemberId d = is.join("d");
  is.boundary();
  ASSERT_EQ(is.views.size(), 2u);
  is.expect_delta_rebuilds_last();
  auto delta = make_delta(is.views[0], is.views[1]);
  ASSERT_EQ(delta->added.size(), 2u);
  EXPECT_EQ(delta->added[0].id, b);
  EXPECT_EQ(delta->added[0].rank, 1u);
  EXPECT_EQ(delta->added[1].id, d);
  EXPECT_EQ(delta->added[1].rank, 3u);
}

TEST(ViewDelta, LeaversAndJoinersInOneViewAndANewZoneInFront) {
  Issuer is(4);
  std::vector<MemberId> ids;
  for (const char* h : {"a", "b", "c", "d"}) ids.push_back(is.join(h, "z2"));
  is.join("x", "z1");  // a zone that sorts first: every survivor's rank moves
  is.join("bb", "z2");
  is.boundary({ids[1], ids[3]});
  ASSERT_EQ(is.views.size(), 2u);
  EXPECT_EQ(is.views[1].members[0].zone, "z1");
  is.expect_delta_rebuilds_last();
}

TEST(ViewDelta, EveryViewOfARandomHistoryIsRebuiltFromTheOneBefore) {
  std::mt19937 rng(19);
  Issuer is(6);
  for (int i = 0; i < 6; ++i) is.join("h" + std::to_string(i), i % 2 ? "za" : "zb");
  for (int round = 0; round < 60; ++round) {
    const std::size_t before = is.views.size();
    const View v = is.m.view();
    switch (rng() % 3) {
      case 0:
        if (v.size() > 1) is.remove(v.members[rng() % v.size()].id);
        break;
      case 1: {
        const int joins = 1 + static_cast<int>(rng() % 3);
        for (int j = 0; j < joins; ++j)
          is.join("n" + std::to_string(round) + "-" + std::to_string(j),
                  "z" + std::string(1, static_cast<char>('a' + rng() % 3)));
        std::vector<MemberId> leaving;
        if (v.size() > 2 && rng() % 2) leaving.push_back(v.members[rng() % v.size()].id);
        is.boundary(leaving);
        break;
      }
      default:
        if (v.size() > 2) {
          is.remove(v.members[0].id);  // the first and the last rank
          if (is.m.view().size() > 1) is.remove(is.m.view().members.back().id);
        }
    }
    for (std::size_t k = std::max<std::size_t>(before, 1); k < is.views.size(); ++k) {
      auto delta = make_delta(is.views[k - 1], is.views[k]);
      ASSERT_TRUE(delta) << "round " << round;
      auto rebuilt = apply_delta(is.views[k - 1], *delta);
      ASSERT_TRUE(rebuilt.is_ok()) << rebuilt.status().to_string();
      ASSERT_EQ(*rebuilt, is.views[k]) << "round " << round;
    }
  }
  EXPECT_GT(is.views.size(), 40u);
}

View small_view(Epoch epoch) {
  View v;
  v.epoch = epoch;
  for (std::uint32_t r = 0; r < 4; ++r) {
    v.members.push_back({r + 1, r, "127.0.0.1:1", "h", "z", {"tcp"}});
    v.ring.push_back(r);
  }
  return v;
}

View without_second(Epoch epoch) {
  View next = small_view(epoch);
  next.members.erase(next.members.begin() + 1);
  next.ring.pop_back();
  for (std::uint32_t r = 0; r < next.members.size(); ++r) next.members[r].rank = r;
  return next;
}

TEST(ViewDelta, AnotherBaseIsRefusedAsStale) {
  const View base = small_view(3);
  auto delta = make_delta(base, without_second(4));
  ASSERT_TRUE(delta);
  EXPECT_EQ(apply_delta(small_view(2), *delta).status().code(), StatusCode::kStaleEpoch);
  EXPECT_EQ(apply_delta(without_second(4), *delta).status().code(), StatusCode::kStaleEpoch);
}

TEST(ViewDelta, ACorruptedDeltaIsRefusedNotApplied) {
  const View base = small_view(3);
  const ViewDelta good = *make_delta(base, without_second(4));
  auto refused = [&](ViewDelta d, std::string_view why) {
    auto r = apply_delta(base, d);
    EXPECT_EQ(r.status().code(), StatusCode::kBadFrame) << why;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  ViewDelta d = good;
  d.digest ^= 1;
  refused(d, "digest");
  d = good;
  d.removed = {3};  // a valid shape, the wrong member: only the digest tells
  refused(d, "digest");
  d = good;
  d.removed = {2, 2};
  refused(d, "twice");
  d = good;
  d.removed = {99};
  refused(d, "not in the base");
  d = good;
  d.size = 1u << 30;  // no allocation of a size the sender chose
  refused(d, "does not match");
  d = good;
  d.added = {{3, 0, "x:1", "h", "z", {}}};
  d.size = 4;
  refused(d, "already present");
  d = good;
  d.added = {{7, 2, "x:1", "h", "z", {}}, {8, 2, "x:1", "h", "z", {}}};
  d.size = 5;
  refused(d, "increasing");
  d = good;
  d.epoch = 3;
  refused(d, "not above");
}

TEST(ViewDelta, NoDeltaWhenSurvivorsChangeOrderOrLabels) {
  const View base = small_view(3);
  View swapped = small_view(4);
  std::swap(swapped.members[0].id, swapped.members[1].id);
  EXPECT_FALSE(make_delta(base, swapped)) << "a reordering the rebuild cannot express";
  View relabelled = small_view(4);
  relabelled.members[2].data_address = "127.0.0.1:2";
  EXPECT_FALSE(make_delta(base, relabelled));
  EXPECT_FALSE(make_delta(View{}, small_view(4))) << "from nothing: the whole view";
  EXPECT_FALSE(make_delta(base, small_view(3))) << "not newer";
  auto same = make_delta(base, small_view(4));  // a link rebuild: same members, new epoch
  ASSERT_TRUE(same);
  EXPECT_TRUE(same->removed.empty() && same->added.empty());
}

TEST(ViewDelta, DigestCoversEveryField) {
  const View v = small_view(3);
  const auto d = view_digest(v);
  View w = v;
  w.epoch = 4;
  EXPECT_NE(view_digest(w), d);
  w = v;
  w.members[3].capabilities.push_back("shm");
  EXPECT_NE(view_digest(w), d);
  w = v;
  w.members[1].zone = "y";
  EXPECT_NE(view_digest(w), d);
  w = v;
  w.members[0].host = "";
  w.members[0].data_address = "h127.0.0.1:1";  // moved bytes between fields: still differs
  EXPECT_NE(view_digest(w), d);
  w = v;
  std::swap(w.ring[0], w.ring[1]);
  EXPECT_NE(view_digest(w), d);
}

}  // namespace
}  // namespace tributary::membership
