// The lateness the federated workload injects (cli/federated_workload.h, late_ranks): every
// member must compute the same set, of the right size, and different rounds must draw
// different members, or "25% late at random" would be one fixed member late forever.
#include "cli/federated_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace tributary::cli {
namespace {

int count(const std::vector<bool>& late) {
  return static_cast<int>(std::count(late.begin(), late.end(), true));
}

TEST(LateRanks, TheSameSetOfTheRoundedSizeOnEveryCall) {
  for (int world : {1, 2, 3, 4, 8, 13}) {
    for (double fraction : {0.0, 0.25, 0.5, 1.0}) {
      for (std::uint64_t round = 0; round < 20; ++round) {
        const auto late = late_ranks(7, round, world, fraction);
        ASSERT_EQ(late.size(), static_cast<std::size_t>(world));
        EXPECT_EQ(count(late), static_cast<int>(std::lround(fraction * world)))
            << "world " << world << " fraction " << fraction;
        EXPECT_EQ(late, late_ranks(7, round, world, fraction));  // every member agrees
      }
    }
  }
}

TEST(LateRanks, RoundsAndSeedsDrawDifferentMembers) {
  std::set<std::vector<bool>> sets;
  std::vector<int> times_late(8, 0);
  for (std::uint64_t round = 0; round < 400; ++round) {
    const auto late = late_ranks(1, round, 8, 0.25);
    sets.insert(late);
    for (int r = 0; r < 8; ++r) times_late[r] += late[r] ? 1 : 0;
  }
  EXPECT_GT(sets.size(), 10u);  // 28 pairs of 8 are possible
  for (int r = 0; r < 8; ++r) {
    // 100 expected (400 rounds x 2 of 8); a fair draw stays well inside these bounds.
    EXPECT_GT(times_late[r], 60) << "rank " << r;
    EXPECT_LT(times_late[r], 140) << "rank " << r;
  }
  int differ = 0;
  for (std::uint64_t round = 0; round < 50; ++round) {
    differ += late_ranks(1, round, 8, 0.25) != late_ranks(2, round, 8, 0.25) ? 1 : 0;
  }
  EXPECT_GT(differ, 25);
}

}  // namespace
}  // namespace tributary::cli
