// The descriptor checks are wire protocol: agents built from different commits of one
// release must compute the same values, so they are pinned here (the values the two
// hand-written FNV-1a functions produced before they were merged into one on core's
// Fnv1a32). A change here breaks mixed clusters.
#include <gtest/gtest.h>

#include <set>

#include "algorithms/tags.h"

namespace tributary::testing {
namespace {

using algorithms::Collective;
using algorithms::Descriptor;
using algorithms::descriptor_check;

TEST(DescriptorCheck, RootedAndPersonalisedCollectivesKeepTheirValues) {
  EXPECT_EQ(
      descriptor_check(
          {.kind = Collective::kBroadcast, .count = 1000, .dtype = DType::kFloat32, .root = 2}),
      2722495055u);
  EXPECT_EQ(descriptor_check({.kind = Collective::kReduce,
                              .count = 12345678901ull,
                              .dtype = DType::kInt64,
                              .op = ReduceOp::kMax,
                              .root = 7}),
            2225766046u);
  EXPECT_EQ(descriptor_check({.kind = Collective::kGather, .count = 0, .dtype = DType::kUInt8}),
            3382604607u);
  EXPECT_EQ(descriptor_check(
                {.kind = Collective::kScatter, .count = 5, .dtype = DType::kFloat16, .root = 3}),
            739367975u);
  EXPECT_EQ(
      descriptor_check({.kind = Collective::kAllToAll, .count = 77, .dtype = DType::kBFloat16}),
      2979793982u);
  EXPECT_EQ(descriptor_check({.kind = Collective::kBarrier}), 1293623100u);
}

TEST(DescriptorCheck, AllReduceFamilyKeepsItsValues) {
  EXPECT_EQ(descriptor_check({.kind = Collective::kAllReduce,
                              .count = 1000,
                              .dtype = DType::kFloat32,
                              .algorithm = 1}),
            3303283146u);
  EXPECT_EQ(descriptor_check({.kind = Collective::kAllReduce,
                              .count = 12345678901ull,
                              .dtype = DType::kFloat64,
                              .op = ReduceOp::kAvg,
                              .algorithm = 5}),
            616757872u);
  EXPECT_EQ(descriptor_check({.kind = Collective::kReduceScatter,
                              .count = 3,
                              .dtype = DType::kInt32,
                              .op = ReduceOp::kMin}),
            1318912836u);
  EXPECT_EQ(descriptor_check({.kind = Collective::kAllGather, .count = 0, .dtype = DType::kUInt8}),
            1621448555u);
}

// Ranks that disagree on any one field must not exchange data.
TEST(DescriptorCheck, EveryFieldChangesTheCheck) {
  const Descriptor base{.kind = Collective::kReduce,
                        .count = 64,
                        .dtype = DType::kFloat32,
                        .op = ReduceOp::kSum,
                        .root = 1};
  std::set<std::uint32_t> seen = {descriptor_check(base)};
  auto differs = [&](Descriptor d) { return seen.insert(descriptor_check(d)).second; };
  Descriptor d = base;
  d.kind = Collective::kBroadcast;
  EXPECT_TRUE(differs(d));
  d = base;
  d.count = 65;
  EXPECT_TRUE(differs(d));
  d = base;
  d.dtype = DType::kInt32;
  EXPECT_TRUE(differs(d));
  d = base;
  d.op = ReduceOp::kMax;
  EXPECT_TRUE(differs(d));
  d = base;
  d.root = 2;
  EXPECT_TRUE(differs(d));
  Descriptor ar{.kind = Collective::kAllReduce, .count = 64, .algorithm = 1};
  EXPECT_TRUE(differs(ar));
  ar.algorithm = 2;
  EXPECT_TRUE(differs(ar));
}

TEST(TagMaker, SlotsWrapToThirtyTwoBitsAndKeepSeqAndCheck) {
  const algorithms::TagMaker tags(42, 7u);
  const algorithms::Tag t = tags.at((std::uint64_t{1} << 32) + 5);
  EXPECT_EQ(t.seq, 42u);
  EXPECT_EQ(t.slot, 5u);
  EXPECT_EQ(t.check, 7u);
}

}  // namespace
}  // namespace tributary::testing
