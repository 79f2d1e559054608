// The residual policy across membership changes (docs/compression.md): what a view
// change, a join and a rejoin do to the stage-1 and stage-2 residuals.
#include "compression/collectives/compression_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "algorithms/partition.h"
#include "tests/compression/collectives_test_util.h"

namespace tributary::compression::collectives {
namespace {

using namespace testing;

TEST(ResidualPolicy, ViewChangeFoldsOwnerResidualIntoTheWorkerResidual) {
  const std::size_t count = 1000;
  const CompressionPlan plan = must_plan("qint4:bucket=64");
  for (OwnerResidualPolicy policy : {OwnerResidualPolicy::kFold, OwnerResidualPolicy::kDrop}) {
    std::vector<CompressionState> states;
    for (int r = 0; r < 4; ++r) states.emplace_back(policy);
    (void)run_group(plan, states, inputs_for(4, count, 8), ReduceOp::kSum);
    for (int r = 0; r < 4; ++r) {
      auto& s = states[static_cast<std::size_t>(r)];
      ASSERT_TRUE(s.has_owner_residual(kTensor));
      ASSERT_GT(s.owner_residual_norm2(kTensor), 0);
      const auto before = worker_residual(s, count);
      const OwnerResidual owner = *s.find_owner_residual(kTensor);
      // Same size and same rank: ownership unchanged, nothing moves.
      s.on_view_change(4, r);
      EXPECT_TRUE(s.has_owner_residual(kTensor));
      // Rank 3 left: ranks 0..2 of 3, every slice boundary moves.
      s.on_view_change(3, std::min(r, 2));
      EXPECT_FALSE(s.has_owner_residual(kTensor));
      const auto after = worker_residual(s, count);
      const algorithms::Range mine = algorithms::balanced_part(count, 4, r);
      for (std::size_t i = 0; i < count; ++i) {
        const bool owned = i >= mine.begin && i < mine.end();
        const float want = policy == OwnerResidualPolicy::kFold && owned
                               ? before[i] + owner.residual[i - mine.begin]
                               : before[i];
        ASSERT_EQ(after[i], want) << "rank " << r << " element " << i;
      }
    }
  }
}

// Mass conservation across a join (n = 3 -> 4) with kFold: everything that went in either
// came out or is still held in some residual. kDrop loses exactly the owners' residuals.
// With momentum correction (sign's default) what goes in is each worker's velocity
// u = 0.9 u + x, which the test keeps alongside (a joiner starts from u = 0).
TEST(ResidualPolicy, FoldConservesGradientMassAcrossAJoin) {
  const std::size_t count = 777;
  for (const char* spec : {"sign:bucket=64,momentum=0", "sign:bucket=64"})
    for (OwnerResidualPolicy policy : {OwnerResidualPolicy::kFold, OwnerResidualPolicy::kDrop}) {
      SCOPED_TRACE(spec);
      const CompressionPlan plan = must_plan(spec);
      const float m = plan.codec_config.momentum;
      std::vector<CompressionState> states;
      for (int r = 0; r < 4; ++r) states.emplace_back(policy);
      std::vector<double> in_total(count, 0.0), out_total(count, 0.0);
      std::vector<std::vector<float>> velocity(4, std::vector<float>(count, 0.0f));
      auto step = [&](int n, std::uint64_t t) {
        const auto in = inputs_for(n, count, static_cast<std::uint32_t>(t + 1));
        for (std::size_t r = 0; r < in.size(); ++r) {
          for (std::size_t i = 0; i < count; ++i) {
            velocity[r][i] = m * velocity[r][i] + in[r][i];
            in_total[i] += m > 0 ? velocity[r][i] : in[r][i];
          }
        }
        const int nn = n;
        algorithms::MemoryFabric fabric(nn);
        std::vector<std::vector<float>> out = in;
        const auto st = run_ranks(nn, [&](int r) {
          CompressionContext ctx;
          ctx.plan = &plan;
          ctx.state = &states[static_cast<std::size_t>(r)];
          ctx.tensor_id = kTensor;
          ctx.step = t;
          return compressed_all_reduce(fabric.link(r), out[static_cast<std::size_t>(r)].data(),
                                       count, ReduceOp::kSum, ctx, opts(t + 1));
        });
        for (const Status& s : st) EXPECT_TRUE(s.is_ok());
        for (std::size_t i = 0; i < count; ++i) out_total[i] += out[0][i];
      };
      for (std::uint64_t t = 0; t < 5; ++t) step(3, t);
      double dropped = 0;
      for (int r = 0; r < 3; ++r)
        dropped += states[static_cast<std::size_t>(r)].owner_residual_norm2(kTensor);
      for (int r = 0; r < 4; ++r) states[static_cast<std::size_t>(r)].on_view_change(4, r);
      for (std::uint64_t t = 5; t < 10; ++t) step(4, t);
      // in = out + residuals still held.
      std::vector<double> held(count, 0.0);
      for (int r = 0; r < 4; ++r) {
        auto& s = states[static_cast<std::size_t>(r)];
        const auto w = worker_residual(s, count);
        for (std::size_t i = 0; i < count; ++i) held[i] += w[i];
        if (const OwnerResidual* owner = s.find_owner_residual(kTensor)) {
          for (std::size_t i = 0; i < owner->residual.size(); ++i)
            held[owner->offset + i] += owner->residual[i];
        }
      }
      double gap = 0, scale = 0;
      for (std::size_t i = 0; i < count; ++i) {
        gap = std::max(gap, std::fabs(in_total[i] - out_total[i] - held[i]));
        scale = std::max(scale, std::fabs(in_total[i]));
      }
      if (policy == OwnerResidualPolicy::kFold) {
        EXPECT_LT(gap, 1e-4 * std::max(1.0, scale)) << "fold lost or doubled mass";
      } else {
        EXPECT_GT(dropped, 0);
        EXPECT_GT(gap, 1e-2) << "drop should lose the owners' residuals";
      }
    }
}

TEST(ResidualPolicy, LazyFoldMatchesAnExplicitViewChange) {
  const std::size_t count = 500;
  const CompressionPlan plan = must_plan("qint8:bucket=32");
  std::vector<CompressionState> a(4), b(4);
  const auto in4 = inputs_for(4, count, 30);
  (void)run_group(plan, a, in4, ReduceOp::kAvg, 0);
  (void)run_group(plan, b, in4, ReduceOp::kAvg, 0);
  for (int r = 0; r < 3; ++r) a[static_cast<std::size_t>(r)].on_view_change(3, r);
  a.pop_back();
  b.pop_back();
  const auto in3 = inputs_for(3, count, 31);
  const GroupRun ga = run_group(plan, a, in3, ReduceOp::kAvg, 1);
  const GroupRun gb = run_group(plan, b, in3, ReduceOp::kAvg, 1);
  EXPECT_TRUE(same_bits(ga.out[0], gb.out[0]));
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(same_bits(worker_residual(a[static_cast<std::size_t>(r)], count),
                          worker_residual(b[static_cast<std::size_t>(r)], count)));
  }
}

TEST(ResidualPolicy, RejoinDropsEverything) {
  const std::size_t count = 300;
  const std::vector<MatrixShape> shapes = {{0, 10, 20}};
  std::vector<CompressionState> states(2);
  (void)run_group(must_plan("qint4"), states, inputs_for(2, count, 3), ReduceOp::kSum);
  (void)run_group(must_plan("powersgd:rank=1"), states, inputs_for(2, count, 4), ReduceOp::kSum, 0,
                  1 << 18, shapes, 9);
  auto& s = states[0];
  EXPECT_TRUE(s.has_owner_residual(kTensor));
  EXPECT_GT(s.worker().residual_norm2(kWorkerKey), 0);
  EXPECT_NE(s.find_powersgd(9), nullptr);
  s.on_rejoin();
  EXPECT_FALSE(s.has_owner_residual(kTensor));
  EXPECT_FALSE(s.worker().contains(kWorkerKey));
  EXPECT_EQ(s.find_powersgd(9), nullptr);
}

// An attempt that dies part-way leaves the residuals as they were, so re-running it
// in the next epoch gives exactly what a clean first attempt gives: nothing counted twice.

}  // namespace
}  // namespace tributary::compression::collectives
