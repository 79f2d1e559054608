// A step boundary's vote (agent/boundary_vote.h): what one max all-reduce of the members'
// encodings agrees on, field by field, and that a vote survives its encoding.
#include "agent/boundary_vote.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tributary::agent {
namespace {

// What the boundary's all-reduce does to the members' encodings.
BoundaryVote agree(const std::vector<BoundaryVote>& members) {
  BoundaryVote::Encoded max = members.front().encode();
  for (const BoundaryVote& m : members) {
    const BoundaryVote::Encoded e = m.encode();
    for (std::size_t i = 0; i < max.size(); ++i) max[i] = std::max(max[i], e[i]);
  }
  return BoundaryVote::decode(max);
}

BoundaryVote with_refit(std::int64_t alpha_ns, std::int64_t beta_fs) {
  BoundaryVote v;
  v.refit_alpha_ns = alpha_ns;
  v.refit_beta_fs = beta_fs;
  return v;
}

TEST(BoundaryVote, AVoteSurvivesItsEncoding) {
  BoundaryVote v;
  v.leave = true;
  v.newest_epoch = 41;
  v.state_needed = true;
  v.refit_alpha_ns = 5000;
  v.refit_beta_fs = 125;
  const BoundaryVote back = BoundaryVote::decode(v.encode());
  EXPECT_TRUE(back.leave);
  EXPECT_FALSE(back.joiners_waiting);
  EXPECT_EQ(back.newest_epoch, 41u);
  EXPECT_TRUE(back.state_needed);
  EXPECT_EQ(back.refit_alpha_ns, 5000);
  EXPECT_EQ(back.refit_beta_fs, 125);
  EXPECT_EQ(BoundaryVote::decode(BoundaryVote{}.encode()).has_refit(), false);
}

TEST(BoundaryVote, AnyMembersFlagIsEveryonesAndTheNewestEpochWins) {
  BoundaryVote a, b, c;
  a.newest_epoch = 7;
  b.newest_epoch = 9;
  b.joiners_waiting = true;
  c.newest_epoch = 8;
  c.state_needed = true;
  const BoundaryVote agreed = agree({a, b, c});
  EXPECT_FALSE(agreed.leave);
  EXPECT_TRUE(agreed.joiners_waiting);
  EXPECT_TRUE(agreed.state_needed);
  EXPECT_EQ(agreed.newest_epoch, 9u);
  c.leave = true;
  EXPECT_TRUE(agree({a, b, c}).leave);
}

TEST(BoundaryVote, TheRefitIsTheSmallestFitAndNoneIfAnyMemberHasNone) {
  const BoundaryVote agreed = agree({with_refit(9000, 300), with_refit(5000, 700)});
  ASSERT_TRUE(agreed.has_refit());
  EXPECT_EQ(agreed.refit_alpha_ns, 5000);
  EXPECT_EQ(agreed.refit_beta_fs, 300);
  EXPECT_FALSE(agree({with_refit(9000, 300), BoundaryVote{}}).has_refit());
  // Half a fit is no fit: it is not sent as one.
  EXPECT_FALSE(agree({with_refit(9000, 0), with_refit(5000, 700)}).has_refit());
}

}  // namespace
}  // namespace tributary::agent
