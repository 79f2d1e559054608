// When links combine receives and shared memory reads single-copy (transport/receive_paths.h):
// the choice from ranks and cores, the ranks a group has on this host, the flag's words.
#include "transport/receive_paths.h"

#include <gtest/gtest.h>

namespace tributary::transport {
namespace {

TEST(ReceivePaths, AutoFusesWhereRanksOutnumberCores) {
  using enum PathChoice;
  auto paths = [](int ranks, int cores) { return choose_receive_paths(kAuto, kAuto, ranks, cores); };
  EXPECT_FALSE(paths(2, 2).combine) << "a core each: plain receives, in parallel";
  EXPECT_FALSE(paths(2, 2).single_copy);
  EXPECT_TRUE(paths(3, 2).combine);
  EXPECT_FALSE(paths(3, 2).single_copy) << "single copy from twice as many ranks as cores";
  EXPECT_TRUE(paths(4, 2).single_copy);
  EXPECT_TRUE(paths(5, 2).single_copy);
  EXPECT_TRUE(paths(8, 2).combine && paths(8, 2).single_copy);
  EXPECT_FALSE(paths(8, 64).combine) << "a big host";
  EXPECT_TRUE(paths(2, 0).combine) << "no core known counts as one";
  EXPECT_TRUE(choose_receive_paths(kOn, kOn, 1, 64).combine);
  EXPECT_TRUE(choose_receive_paths(kOn, kOn, 1, 64).single_copy);
  EXPECT_FALSE(choose_receive_paths(kOff, kOff, 64, 1).combine);
  EXPECT_FALSE(choose_receive_paths(kOff, kOff, 64, 1).single_copy);
}

TEST(ReceivePaths, ACorePerRankUpToAsManyRanksAsCores) {
  EXPECT_TRUE(core_per_rank(1, 2));
  EXPECT_TRUE(core_per_rank(2, 2)) << "N = 2 on 2 cores: waits spin without yielding";
  EXPECT_FALSE(core_per_rank(3, 2));
  EXPECT_FALSE(core_per_rank(8, 2));
  EXPECT_TRUE(core_per_rank(8, 64));
  EXPECT_TRUE(core_per_rank(1, 0)) << "no core known counts as one";
  EXPECT_FALSE(core_per_rank(2, 0));
}

MemberAdvert member(std::string address, std::vector<std::string> caps = {}) {
  return MemberAdvert{0, std::move(address), std::move(caps), ""};
}

TEST(ReceivePaths, RanksOnThisHostByShmKeyOrAddress) {
  GroupSpec spec;
  spec.rank = 1;
  spec.members = {member("10.0.0.1:5000", {"shm:boot-a/1.2", "tcp"}),
                  member("10.0.0.2:5000", {"shm:boot-a/1.2", "tcp"}),  // same host key
                  member("10.0.0.2:5001", {"tcp"}),                      // same address host
                  member("10.0.0.3:5000", {"shm:boot-b/1.2", "tcp"}),
                  member("[fe80::1]:7000", {"tcp"})};
  EXPECT_EQ(ranks_on_this_host(spec), 3);
  spec.rank = 4;
  EXPECT_EQ(ranks_on_this_host(spec), 1) << "an IPv6 address alone";
  spec.members.push_back(member("[fe80::1]:7001"));
  EXPECT_EQ(ranks_on_this_host(spec), 2);
  spec.rank = 9;
  EXPECT_EQ(ranks_on_this_host(spec), 1) << "a rank outside the group counts itself";
  EXPECT_GE(usable_cores(), 1);
}

TEST(ReceivePaths, ChoiceWords) {
  EXPECT_EQ(*parse_path_choice("auto"), PathChoice::kAuto);
  EXPECT_EQ(*parse_path_choice("on"), PathChoice::kOn);
  EXPECT_EQ(*parse_path_choice("off"), PathChoice::kOff);
  EXPECT_EQ(parse_path_choice("yes").status().code(), StatusCode::kInvalidArgument);
  for (auto c : {PathChoice::kAuto, PathChoice::kOn, PathChoice::kOff}) {
    EXPECT_EQ(*parse_path_choice(to_string(c)), c);
  }
}

}  // namespace
}  // namespace tributary::transport
