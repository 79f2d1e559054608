// A view's context (agent/view_context.h): what adopting a view knows before any link
// exists, the same on every member of the view.
#include "agent/view_context.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tributary::agent {
namespace {

membership::View view_of(std::uint64_t epoch, const std::vector<std::string>& zones) {
  membership::View v;
  v.epoch = epoch;
  for (std::size_t r = 0; r < zones.size(); ++r) {
    membership::ViewMember m;
    m.id = 10 + r;
    m.rank = static_cast<std::uint32_t>(r);
    m.zone = zones[r];
    v.members.push_back(m);
  }
  return v;
}

TEST(ViewContext, ZonesAreNumberedByTheirLowestRank) {
  const ViewContext c(view_of(4, {"eu", "eu", "us", "us", "ap"}), 2);
  EXPECT_EQ(c.epoch(), 4u);
  EXPECT_EQ(c.size(), 5);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.zone_of_rank, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(c.layout.zones(), 3);
  EXPECT_EQ(c.layout.zone_of(2), 1);
  EXPECT_EQ(c.layout.local_index(3), 1);
}

TEST(ViewContext, OneUnlabelledZoneIsOneZone) {
  const ViewContext c(view_of(1, {"", "", ""}), 0);
  EXPECT_EQ(c.zone_of_rank, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(c.layout.zones(), 1);
}

TEST(ViewContext, ANewContextHasNothingOfTheLinks) {
  // What fit_links() and connect set is the new view's alone: a context starts without.
  const ViewContext c(view_of(9, {"a", "b", "a", "b"}), 1);
  EXPECT_EQ(c.link, nullptr);
  EXPECT_TRUE(c.ring_order.empty());
  // Members ordered by rank are contiguous by zone in a coordinator's view, but the
  // numbering does not rely on it: "a" is zone 0 wherever it appears.
  EXPECT_EQ(c.zone_of_rank, (std::vector<int>{0, 1, 0, 1}));
}

TEST(ViewContext, BeforeAnyViewItIsEmpty) {
  const ViewContext c;
  EXPECT_EQ(c.epoch(), 0u);
  EXPECT_EQ(c.size(), 0);
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.link, nullptr);
  EXPECT_EQ(c.layout.zones(), 1);  // what a cost model asked before a view prices: one rank
}

}  // namespace
}  // namespace tributary::agent
