// Hierarchical all-reduce by zone (algorithms/hierarchical.h): the zone layout, every
// dtype x op x count over equal and unequal zones (ranks as threads over MemoryFabric),
// identical bits on every rank and the exact reference; the cost model's choice between
// flat and hierarchical; a killed member inside a zone, a killed zone's last member and a
// frozen member fail every rank before the deadline, never with a partial success; ranks
// that disagree on the zones fail with kMismatch.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/cost_model.h"
#include "algorithms/hierarchical.h"
#include "algorithms/memory_link.h"
#include "algorithms/seq_space.h"
#include "algorithms/zone_layout.h"
#include "all_reduce_batch.h"
#include "tests/support/dying_link.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHierarchical = algorithms::AllReduceAlgorithm::kHierarchical;

TEST(ZoneLayout, GroupsShardsAndCrossGroups) {
  const std::vector<int> zones = {7, 7, 3, 3, 3, 7, 9};
  const algorithms::ZoneLayout layout(zones, 7);
  EXPECT_EQ(layout.zones(), 3);
  EXPECT_EQ(layout.members(0), (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(layout.members(1), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(layout.members(2), (std::vector<int>{6}));
  EXPECT_EQ(layout.local_index(5), 2);
  EXPECT_EQ(layout.shards(), 1);
  EXPECT_EQ(layout.largest_zone(), 3);
  EXPECT_EQ(layout.cross_group(0), (std::vector<int>{0, 2, 6}));
  const algorithms::ZoneLayout one({}, 4);
  EXPECT_EQ(one.zones(), 1);
  EXPECT_EQ(one.shards(), 4);
  // Labels are names only; the grouping is what ranks must agree on.
  const std::vector<int> relabelled = {1, 1, 0, 0, 0, 1, 2};
  EXPECT_EQ(algorithms::ZoneLayout(relabelled, 7).fingerprint(), layout.fingerprint());
  const std::vector<int> other = {7, 7, 3, 3, 7, 7, 9};
  EXPECT_NE(algorithms::ZoneLayout(other, 7).fingerprint(), layout.fingerprint());
}

TEST(ZoneLayout, CrossZoneSeqIsAFreshSpace) {
  using algorithms::SeqSpace;
  const std::uint64_t seq = 12345;
  std::vector<std::uint64_t> seqs = {seq};
  for (auto space : {SeqSpace::kAgreement, SeqSpace::kCompressedDense, SeqSpace::kCompressedStage2,
                     SeqSpace::kCompressedPlain}) {
    seqs.push_back(algorithms::seq_in(space, seq));
  }
  for (std::uint64_t s : std::vector<std::uint64_t>(seqs)) {
    const std::uint64_t cross = algorithms::cross_zone_seq(s);
    for (std::uint64_t other : seqs) EXPECT_NE(cross, other);
    EXPECT_EQ(algorithms::cross_zone_seq(cross), s);
  }
}

using testing::Case;

void run_zoned(const std::vector<int>& zones, const std::vector<Case>& cases,
               algorithms::AllReduceAlgorithm algorithm = kHierarchical, bool combining = false) {
  testing::run_batch(algorithm, static_cast<int>(zones.size()), cases, zones, combining);
}

class HierarchicalLayouts : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(HierarchicalLayouts, CountsOpsAndChunking) {
  const std::vector<int>& zones = GetParam();
  std::vector<Case> cases;
  for (bool in_place : {false, true}) {
    for (std::size_t count : {0, 1, 2, 7, 1000, 4099}) {
      cases.push_back({count, DType::kFloat32, ReduceOp::kSum, in_place, 64});
      cases.push_back({count, DType::kInt32, ReduceOp::kMax, in_place, 64});
      cases.push_back({count, DType::kBFloat16, ReduceOp::kAvg, in_place, 64});
      cases.push_back({count, DType::kInt64, ReduceOp::kProd, in_place, 96});
    }
    cases.push_back({70001, DType::kFloat32, ReduceOp::kAvg, in_place, 256 * 1024});
    cases.push_back({1001, DType::kFloat32, ReduceOp::kSum, in_place, 64, true});
  }
  run_zoned(zones, cases);
  // The zones' sub-links pass combining receives through (SubLink::recv_combine).
  run_zoned(zones, cases, kHierarchical, /*combining=*/true);
}

TEST_P(HierarchicalLayouts, EveryDTypeAndOp) {
  std::vector<Case> cases;
  for (int d = 0; d < kNumDTypes; ++d) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      for (std::size_t count : {std::size_t{13}, std::size_t{301}}) {
        cases.push_back({count, static_cast<DType>(d), static_cast<ReduceOp>(o), count == 13, 64});
      }
    }
  }
  run_zoned(GetParam(), cases);
}

// Equal zones, unequal zones (a zone of one: the last member of its zone), zones out of
// rank order, one zone (a ring), a single member per zone (only the cross phase).
INSTANTIATE_TEST_SUITE_P(
    Zones, HierarchicalLayouts,
    ::testing::Values(std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 0, 0, 1, 1, 1},
                      std::vector<int>{0, 0, 1, 1, 1, 2, 2, 2, 2}, std::vector<int>{0, 1, 1, 1},
                      std::vector<int>{4, 2, 4, 2, 9, 9}, std::vector<int>{0, 0, 0, 0, 0},
                      std::vector<int>{0, 1, 2}));

TEST(HierarchicalAuto, LargeZonedMessagesGoHierarchical) {
  run_zoned({0, 0, 0, 1, 1, 1}, {{100000, DType::kFloat32, ReduceOp::kSum, false, 4096}},
            algorithms::AllReduceAlgorithm::kAuto);
}

TEST(HierarchicalCostModel, ChoosesByZonesAndSize) {
  const std::vector<int> two_by_three = {0, 0, 0, 1, 1, 1};
  const algorithms::ZoneLayout zoned(two_by_three, 6);
  const algorithms::ZoneLayout flat({}, 6);
  // 100 Mbit/s between the zones, 1 ms: the shaped-link benchmark's network.
  const algorithms::CostModel model =
      algorithms::CostModel::default_model().with_wan(1e-3, 8.0 / 100e6);
  const std::size_t big = std::size_t{64} << 20;
  EXPECT_EQ(model.choose(zoned, big), kHierarchical);
  EXPECT_NE(model.choose(flat, big), kHierarchical);
  // Small messages too: one WAN round trip instead of a flat algorithm's several.
  EXPECT_EQ(model.choose(zoned, 8), kHierarchical);
  // A link between zones as fast as inside them: the extra hops do not pay.
  const algorithms::CostModel lan = algorithms::CostModel::default_model().with_wan(
      algorithms::CostModel::kDefaultAlpha, algorithms::CostModel::kDefaultBeta);
  EXPECT_NE(lan.choose(zoned, 8), kHierarchical);
  EXPECT_NE(lan.choose(zoned, 4096), kHierarchical);
  // The flat ring moves 2(n-1)/n of the vector across the link, hierarchical 1x.
  const double ring = model.predict(algorithms::AllReduceAlgorithm::kRing, zoned, big);
  const double hier = model.predict(kHierarchical, zoned, big);
  EXPECT_NEAR(ring / hier, 2.0 * 5 / 6, 0.1);
  // Unequal zones cost the larger zone's balance, not WAN bytes.
  const std::vector<int> uneven = {0, 0, 1, 1, 1, 1};
  EXPECT_EQ(model.choose(algorithms::ZoneLayout(uneven, 6), big), kHierarchical);
}

std::vector<Status> run_with_victim(algorithms::MemoryFabric& fabric, const std::vector<int>& zones,
                                    int victim, int allowed_sends,
                                    std::chrono::milliseconds deadline) {
  const int n = static_cast<int>(zones.size());
  return testing::run_ranks(n, [&](int r) {
    algorithms::CollectiveOptions o;
    o.seq = 5;
    o.algorithm = kHierarchical;
    o.chunk_bytes = 64;
    o.zones = zones;
    o.deadline = Deadline::after(deadline);
    std::vector<float> data(1000, 1.0f);
    Status st;
    if (r == victim && allowed_sends >= 0) {
      testing::DyingLink link(fabric, r, allowed_sends);
      st = all_reduce(link, data.data(), data.data(), 1000, DType::kFloat32, ReduceOp::kSum, o);
    } else {
      st = all_reduce(fabric.link(r), data.data(), data.data(), 1000, DType::kFloat32,
                      ReduceOp::kSum, o);
    }
    // The harness plays "the caller abandons the link": its sockets close.
    if (!st.is_ok()) fabric.kill(r);
    return st;
  });
}

struct Victim {
  std::vector<int> zones;
  int rank;
  int allowed_sends;  // sends before it dies
};

class HierarchicalFaults : public ::testing::TestWithParam<Victim> {};

TEST_P(HierarchicalFaults, KilledMemberFailsEveryRankBeforeTheDeadline) {
  const Victim& v = GetParam();
  algorithms::MemoryFabric fabric(static_cast<int>(v.zones.size()));
  const auto deadline = std::chrono::seconds(5);
  const auto start = Clock::now();
  const auto statuses = run_with_victim(fabric, v.zones, v.rank, v.allowed_sends, deadline);
  EXPECT_LT(Clock::now() - start, deadline);
  for (std::size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_FALSE(statuses[r].is_ok()) << "rank " << r << " kept a partial result";
    if (static_cast<int>(r) != v.rank) {
      EXPECT_EQ(statuses[r].code(), StatusCode::kPeerLost)
          << "rank " << r << ": " << statuses[r].to_string();
    }
  }
}

// Inside a zone (an owner, a member past the smallest zone's size), the only member of a
// zone (it dies in the cross phase), and before or after its first messages.
INSTANTIATE_TEST_SUITE_P(Victims, HierarchicalFaults,
                         ::testing::Values(Victim{{0, 0, 0, 1, 1, 1}, 1, 1},
                                           Victim{{0, 0, 0, 1, 1, 1}, 4, 0},
                                           Victim{{0, 0, 1, 1, 1}, 4, 2},
                                           Victim{{0, 0, 1, 1, 2}, 4, 1},
                                           Victim{{0, 1, 1, 1}, 0, 0}));

TEST(HierarchicalFaults, FrozenZoneTimesEveryoneOut) {
  const std::vector<int> zones = {0, 0, 1, 1, 2};
  algorithms::MemoryFabric fabric(5);
  fabric.freeze(4);  // a whole zone goes silent (SIGSTOP of its last member)
  const auto deadline = std::chrono::milliseconds(300);
  const auto start = Clock::now();
  const auto statuses = run_with_victim(fabric, zones, 4, -1, deadline);
  const auto elapsed = Clock::now() - start;
  EXPECT_LT(elapsed, deadline + std::chrono::seconds(2));
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(statuses[static_cast<std::size_t>(r)].is_ok()) << "rank " << r;
  }
}

TEST(HierarchicalMismatch, RanksThatDisagreeOnZonesFail) {
  algorithms::MemoryFabric fabric(4);
  const auto statuses = testing::run_ranks(4, [&](int r) {
    const std::vector<int> zones =
        r == 3 ? std::vector<int>{0, 1, 1, 1} : std::vector<int>{0, 0, 1, 1};
    algorithms::CollectiveOptions o;
    o.seq = 2;
    o.algorithm = kHierarchical;
    o.zones = zones;
    o.deadline = Deadline::after(std::chrono::seconds(3));
    std::vector<float> data(100, 1.0f);
    Status st = all_reduce(fabric.link(r), data.data(), data.data(), 100, DType::kFloat32,
                           ReduceOp::kSum, o);
    if (!st.is_ok()) fabric.kill(r);
    return st;
  });
  int mismatches = 0;
  for (const Status& st : statuses) {
    EXPECT_FALSE(st.is_ok());
    if (st.code() == StatusCode::kMismatch) ++mismatches;
  }
  EXPECT_GE(mismatches, 1);
}

TEST(HierarchicalArguments, ZoneLabelsMustCoverTheGroup) {
  algorithms::MemoryFabric fabric(2);
  std::vector<float> data(4, 1.0f);
  algorithms::CollectiveOptions o;
  const std::vector<int> three = {0, 0, 1};
  o.zones = three;
  EXPECT_EQ(
      all_reduce(fabric.link(0), data.data(), data.data(), 4, DType::kFloat32, ReduceOp::kSum, o)
          .code(),
      StatusCode::kInvalidArgument);
  const std::vector<int> negative = {0, -1};
  o.zones = negative;
  EXPECT_EQ(
      all_reduce(fabric.link(0), data.data(), data.data(), 4, DType::kFloat32, ReduceOp::kSum, o)
          .code(),
      StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary
