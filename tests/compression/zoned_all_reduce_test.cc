// The two-tier compressed all-reduce (CompressionContext::wan): float32 inside zones, a
// codec across them. Ranks as threads over MemoryFabric, zones as in the shaped-link
// benchmark and unequal ones: identical bits on every rank, the exact average within the
// codec's error, the cross-zone wire bytes of the codec, error feedback kept per tier
// (residuals in the slow tier's state only, on the shard owners), all-or-nothing attempts
// on both tiers, and a codec inside zones refused.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "algorithms/zone_layout.h"
#include "tests/compression/collectives_test_util.h"

namespace tributary::compression::collectives::testing {
namespace {

struct TwoTierRun {
  std::vector<std::vector<float>> out;
  std::vector<CompressionStats> stats;
  std::vector<Status> status;
};

// One call on every rank: `plan` inside zones, `wan_plan` across, states per tier.
TwoTierRun run_two_tier(
    const std::vector<int>& zones, const CompressionPlan& plan, const CompressionPlan& wan_plan,
    std::vector<CompressionState>& wan_states, const std::vector<std::vector<float>>& inputs,
    std::uint64_t step,
    algorithms::AllReduceAlgorithm algorithm = algorithms::AllReduceAlgorithm::kHierarchical,
    std::span<CompressionAttempt* const> wan_attempts = {}) {
  const int n = static_cast<int>(zones.size());
  algorithms::MemoryFabric fabric(n);
  TwoTierRun g{inputs, std::vector<CompressionStats>(inputs.size()), {}};
  std::vector<CompressionState> zone_states(inputs.size());
  g.status = run_ranks(n, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    CompressionContext wan = context(wan_plan, wan_states[ur], step);
    if (!wan_attempts.empty()) wan.attempt = wan_attempts[ur];
    CompressionContext ctx = context(plan, zone_states[ur], step);
    ctx.wan = &wan;
    ctx.stats = &g.stats[ur];
    algorithms::CollectiveOptions o = opts(step + 1, 64 * 1024);
    o.zones = zones;
    o.algorithm = algorithm;
    return compressed_all_reduce(fabric.link(r), g.out[ur].data(), g.out[ur].size(), ReduceOp::kAvg,
                                 ctx, o);
  });
  return g;
}

double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

class TwoTier : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(TwoTier, Qint8AcrossZonesIsIdenticalEverywhereAndClose) {
  const std::vector<int>& zones = GetParam();
  const int n = static_cast<int>(zones.size());
  const std::size_t count = 100003;
  const CompressionPlan f32 = must_plan("float32");
  const CompressionPlan q8 = must_plan("qint8");
  std::vector<CompressionState> wan_states(zones.size());
  const auto in = inputs_for(n, count, 3);
  const auto g = run_two_tier(zones, f32, q8, wan_states, in, 0);
  for (int r = 0; r < n; ++r) ASSERT_TRUE(g.status[static_cast<std::size_t>(r)].is_ok()) << r;
  for (int r = 1; r < n; ++r) EXPECT_TRUE(same_bits(g.out[static_cast<std::size_t>(r)], g.out[0]));
  const auto want = exact(in, ReduceOp::kAvg);
  // Two quantizations of zone sums (|x| up to ~4 sigma x zone size) at 8 bits.
  EXPECT_LT(worst_error(g.out[0], want), 0.05);
  EXPECT_GT(worst_error(g.out[0], want), 0.0) << "qint8 cannot be exact: was it used?";
  // Across zones travels about one byte per element per direction, 2(Z-1)/Z of the vector.
  const algorithms::ZoneLayout layout(zones, n);
  std::uint64_t cross = 0;
  for (const auto& s : g.stats) cross += s.cross_zone_wire_bytes;
  const double z = layout.zones();
  const double expected = 2 * (z - 1) / z * static_cast<double>(count) * layout.zones();
  EXPECT_GT(static_cast<double>(cross), 0.95 * expected);
  EXPECT_LT(static_cast<double>(cross), 1.15 * expected);
  // Error feedback lives in the slow tier, on the shard owners only.
  for (int r = 0; r < n; ++r) {
    auto& st = wan_states[static_cast<std::size_t>(r)];
    const bool owner = layout.local_index(r) < two_tier_shards(q8, layout);
    EXPECT_EQ(st.worker().contains(kWorkerKey), owner) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Zones, TwoTier,
                         ::testing::Values(std::vector<int>{0, 0, 0, 1, 1, 1},
                                           std::vector<int>{0, 0, 1, 1, 1, 2, 2}));

TEST(TwoTier, Float32AcrossZonesEqualsTheHierarchicalAllReduce) {
  const std::vector<int> zones = {0, 0, 1, 1, 1};
  const CompressionPlan f32 = must_plan("float32");
  std::vector<CompressionState> wan_states(zones.size());
  const auto in = inputs_for(5, 4099, 5);
  const auto two = run_two_tier(zones, f32, f32, wan_states, in, 0);
  // The same call without a slow-tier codec: hierarchical float32 all the way.
  algorithms::MemoryFabric fabric(5);
  auto plain = in;
  const auto st = run_ranks(5, [&](int r) {
    algorithms::CollectiveOptions o = opts(1, 64 * 1024);
    o.zones = zones;
    o.algorithm = algorithms::AllReduceAlgorithm::kHierarchical;
    auto& v = plain[static_cast<std::size_t>(r)];
    return algorithms::all_reduce(fabric.link(r), v.data(), v.data(), v.size(), DType::kFloat32,
                                  ReduceOp::kAvg, o);
  });
  for (int r = 0; r < 5; ++r) {
    ASSERT_TRUE(two.status[static_cast<std::size_t>(r)].is_ok());
    ASSERT_TRUE(st[static_cast<std::size_t>(r)].is_ok());
    EXPECT_TRUE(same_bits(two.out[static_cast<std::size_t>(r)], plain[0])) << "rank " << r;
  }
}

TEST(TwoTier, ResidualFeedsTheNextStepAndOneZoneIsFlat) {
  const std::vector<int> zones = {0, 0, 0, 1, 1, 1};
  const CompressionPlan f32 = must_plan("float32");
  const CompressionPlan q8 = must_plan("qint8");
  std::vector<CompressionState> wan_states(zones.size());
  const auto in = inputs_for(6, 5000, 9);
  ASSERT_TRUE(run_two_tier(zones, f32, q8, wan_states, in, 0).status[0].is_ok());
  const auto before = worker_residual(wan_states[0], 5000);
  const auto second = run_two_tier(zones, f32, q8, wan_states, in, 1);
  ASSERT_TRUE(second.status[0].is_ok());
  EXPECT_FALSE(same_bits(worker_residual(wan_states[0], 5000), before));
  // One zone: no slow tier, the wan context is ignored and nothing crosses.
  std::vector<CompressionState> unused(6);
  const auto flat = run_two_tier({0, 0, 0, 0, 0, 0}, f32, q8, unused, in, 0);
  for (const auto& s : flat.stats) EXPECT_EQ(s.cross_zone_wire_bytes, 0u);
  EXPECT_FALSE(unused[0].worker().contains(kWorkerKey));
}

TEST(TwoTier, AnAttemptRolledBackLeavesTheSlowTierAsBefore) {
  const std::vector<int> zones = {0, 0, 0, 1, 1, 1};
  const CompressionPlan f32 = must_plan("float32");
  const CompressionPlan q8 = must_plan("qint8");
  std::vector<CompressionState> wan_states(zones.size());
  const auto in = inputs_for(6, 9000, 4);
  ASSERT_TRUE(run_two_tier(zones, f32, q8, wan_states, in, 0).status[0].is_ok());
  const TensorState before = capture(wan_states[0]);
  std::vector<std::unique_ptr<CompressionAttempt>> owned;
  std::vector<CompressionAttempt*> attempts;
  for (auto& st : wan_states) {
    owned.push_back(std::make_unique<CompressionAttempt>(st, kTensor));
    attempts.push_back(owned.back().get());
  }
  const auto g = run_two_tier(zones, f32, q8, wan_states, in, 1,
                              algorithms::AllReduceAlgorithm::kHierarchical, attempts);
  for (const Status& st : g.status) ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_FALSE(same_bits(capture(wan_states[0]).worker.residual, before.worker.residual));
  for (auto* a : attempts) a->rollback();  // the cluster did not commit the step
  EXPECT_TRUE(same_bits(capture(wan_states[0]).worker.residual, before.worker.residual));
  for (auto* a : attempts) a->commit();
}

TEST(TwoTier, CodecInsideZonesIsRefused) {
  const CompressionPlan q4 = must_plan("qint4");
  const CompressionPlan q8 = must_plan("qint8");
  std::vector<CompressionState> wan_states(4);
  const auto g = run_two_tier({0, 0, 1, 1}, q4, q8, wan_states, inputs_for(4, 100, 1), 0);
  for (const Status& s : g.status) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  }
}

TEST(TwoTier, AutoPicksTwoTiersForLargeTensorsOverASlowLink) {
  const std::vector<int> zones = {0, 0, 1, 1};
  const CompressionPlan f32 = must_plan("float32");
  const CompressionPlan q8 = must_plan("qint8");
  std::vector<CompressionState> wan_states(4);
  const auto g = run_two_tier(zones, f32, q8, wan_states, inputs_for(4, 70000, 2), 0,
                              algorithms::AllReduceAlgorithm::kAuto);
  std::uint64_t cross = 0;
  for (const auto& s : g.stats) cross += s.cross_zone_wire_bytes;
  EXPECT_GT(cross, 0u);
}

}  // namespace
}  // namespace tributary::compression::collectives::testing
