// compressed_all_reduce over the in-memory fabric, scheme by scheme: ranks are threads.
// Sweeps group sizes 1..8, odd counts and many-piece chunking for every scheme; checks
// that every rank holds the same bits, that the error stays within the codec's bound,
// that error feedback pays over steps, the top-k dense switch, PowerSGD on low-rank
// input, wire volumes, and bad or disagreeing arguments.
#include "compression/collectives/compressed_all_reduce.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "tests/compression/collectives_test_util.h"

namespace tributary::compression::collectives {
namespace {

using namespace testing;

// Per-element error bound for one call (first step, zero residuals), relative to the
// largest |input| and |result|: stage 1 adds at most one quantum per contribution, stage 2
// one quantum of the reduced slice. quantum = amax * q.
double error_bound(const std::string& spec, int n, double amax_in, double amax_sum, ReduceOp op) {
  double q = 0;
  if (spec.rfind("float16", 0) == 0)
    q = std::ldexp(1.0, -11);
  else if (spec.rfind("bfloat16", 0) == 0)
    q = std::ldexp(1.0, -8);
  else if (spec.rfind("qint8", 0) == 0)
    q = 1.0 / 127;
  else if (spec.rfind("qint4", 0) == 0)
    q = 1.0 / 7;
  else if (spec.rfind("topk", 0) == 0)
    q = std::ldexp(1.0, -8);  // density 1: bf16 values
  // The reduced slice can exceed amax_sum by the stage-1 errors: q * n * amax_in more.
  double b = q * (n * amax_in + amax_sum + q * n * amax_in) * 1.001 + 1e-6;
  if (op == ReduceOp::kAvg) b /= n;
  return b;
}

class QuantizedSweep : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizedSweep, EveryRankIdenticalAndWithinBound) {
  const std::string spec = GetParam();
  const CompressionPlan plan = must_plan(spec);
  for (int n = 1; n <= 8; ++n) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1001}, std::size_t{4099}}) {
      for (std::size_t chunk : {std::size_t{64}, std::size_t{256 * 1024}}) {
        if (chunk == 64 && count > 1001) continue;  // many pieces, kept quick
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          SCOPED_TRACE(spec + " n=" + std::to_string(n) + " count=" + std::to_string(count) +
                       " chunk=" + std::to_string(chunk) +
                       (op == ReduceOp::kSum ? " sum" : " avg"));
          std::vector<CompressionState> states(static_cast<std::size_t>(n));
          const auto in = inputs_for(n, count, static_cast<std::uint32_t>(count + 13 * n));
          const GroupRun g = run_group(plan, states, in, op, 0, chunk);
          for (const Status& s : g.status) ASSERT_TRUE(s.is_ok()) << s.to_string();
          for (int r = 1; r < n; ++r)
            ASSERT_TRUE(same_bits(g.out[0], g.out[static_cast<std::size_t>(r)])) << "rank " << r;
          const auto want = exact(in, op);
          double amax_in = 0, amax_sum = 0;
          for (const auto& v : in)
            for (float x : v) amax_in = std::max(amax_in, std::fabs(double{x}));
          for (double x : exact(in, ReduceOp::kSum)) amax_sum = std::max(amax_sum, std::fabs(x));
          const double bound = error_bound(spec, n, amax_in, amax_sum, op);
          for (std::size_t i = 0; i < count; ++i) {
            ASSERT_LE(std::fabs(g.out[0][i] - want[i]), bound) << "element " << i;
          }
          if (plan.kind == CompressionPlan::Kind::kQuantized) {
            EXPECT_EQ(g.stats[0].quantizations, 2);
          }
          EXPECT_EQ(g.stats[0].raw_bytes, count * 4);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, QuantizedSweep,
                         ::testing::Values("float16", "bfloat16", "qint8:bucket=64",
                                           "qint8:bucket=512,stochastic=0", "qint4:bucket=32",
                                           "qint4:bucket=256,zstd", "topk:density=1,dense_at=100"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(CompressedAllReduce, SignAndSparseSweepAgreeAcrossRanks) {
  // No elementwise bound for sign or top-k 5%: identical bits and finite values only.
  for (const char* spec : {"sign:bucket=64", "topk:density=0.05", "topk:density=0.05,zstd"}) {
    const CompressionPlan plan = must_plan(spec);
    for (int n = 1; n <= 8; ++n) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4099}}) {
        SCOPED_TRACE(std::string(spec) + " n=" + std::to_string(n) +
                     " count=" + std::to_string(count));
        std::vector<CompressionState> states(static_cast<std::size_t>(n));
        const auto in = inputs_for(n, count, 5);
        const GroupRun g = run_group(plan, states, in, ReduceOp::kAvg, 0, 128);
        for (const Status& s : g.status) ASSERT_TRUE(s.is_ok()) << s.to_string();
        for (int r = 1; r < n; ++r)
          ASSERT_TRUE(same_bits(g.out[0], g.out[static_cast<std::size_t>(r)]));
        for (float x : g.out[0]) ASSERT_TRUE(std::isfinite(x));
      }
    }
  }
}

// Top-k ships a large tensor in pieces of 2^20 elements (selected, sent and summed one at
// a time): with every element kept (density 1) the result is the average to bf16
// precision in every piece, the ragged last one included, on every rank alike.
TEST(CompressedAllReduce, TopKLargeTensorsGoInPiecesAndStillAverageExactly) {
  const int n = 3;
  const std::size_t count = (std::size_t{1} << 21) + 12345;
  const auto in = inputs_for(n, count, 17);
  for (const char* spec : {"topk:density=1,dense_at=100", "topk:density=0.01,warmup=0"}) {
    SCOPED_TRACE(spec);
    const CompressionPlan plan = must_plan(spec);
    std::vector<CompressionState> states(n);
    const GroupRun g = run_group(plan, states, in, ReduceOp::kAvg, 0);
    for (const Status& st : g.status) ASSERT_TRUE(st.is_ok()) << st.to_string();
    for (int r = 1; r < n; ++r)
      ASSERT_TRUE(same_bits(g.out[0], g.out[static_cast<std::size_t>(r)]));
    if (std::string(spec).find("density=1,") == std::string::npos) {
      // About 1% of each rank's elements from each piece, 3-4 bytes apiece, to 2 peers.
      const double per_rank = static_cast<double>(g.stats[0].wire_bytes_sent);
      EXPECT_GT(per_rank, 2 * 0.0066 * count * 3);
      EXPECT_LT(per_rank, 2 * 0.015 * count * 4.5);
      continue;
    }
    const auto want = exact(in, ReduceOp::kAvg);
    double amax_in = 0, amax_sum = 0;
    for (const auto& v : in)
      for (float x : v) amax_in = std::max(amax_in, double{std::fabs(x)});
    for (double x : want) amax_sum = std::max(amax_sum, std::fabs(x) * n);
    const double bound = error_bound("topk", n, amax_in, amax_sum, ReduceOp::kAvg);
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_NEAR(g.out[0][i], want[i], bound) << "element " << i;
  }
}

TEST(CompressedAllReduce, QuantizedWireIsAQuarterOfARing) {
  const int n = 4;
  const std::size_t count = 1 << 16;
  const CompressionPlan plan = must_plan("qint8:bucket=512");
  std::vector<CompressionState> states(n);
  const GroupRun g = run_group(plan, states, inputs_for(n, count, 3), ReduceOp::kSum);
  for (const Status& s : g.status) ASSERT_TRUE(s.is_ok());
  // Per rank: 3 slices out in stage 1, its own slice to 3 peers in stage 2, each slice
  // count/4 codes + 4 bytes per 512 + 16 header + 8 size word.
  const std::uint64_t slice = count / 4 + 4 * (count / 4 / 512) + 16 + 8;
  EXPECT_EQ(g.stats[1].wire_bytes_sent, 6 * slice);
  const double ring = 2.0 * (n - 1) / n * count * 4;
  EXPECT_LT(g.stats[1].wire_bytes_sent, ring / 3.9);
}

TEST(CompressedAllReduce, FloatThirtyTwoIsAPlainAllReduce) {
  const CompressionPlan plan = must_plan("float32");
  EXPECT_EQ(plan.kind, CompressionPlan::Kind::kDense);
  for (int n : {1, 3, 5}) {
    std::vector<CompressionState> states(static_cast<std::size_t>(n));
    const auto in = inputs_for(n, 333, 4);
    const GroupRun g = run_group(plan, states, in, ReduceOp::kSum);
    const auto want = exact(in, ReduceOp::kSum);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(g.status[static_cast<std::size_t>(r)].is_ok());
      ASSERT_TRUE(same_bits(g.out[0], g.out[static_cast<std::size_t>(r)]));
    }
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g.out[0][i], want[i], 1e-4);
  }
}

TEST(CompressedAllReduce, RejectsBadArguments) {
  algorithms::MemoryFabric fabric(1);
  const CompressionPlan plan = must_plan("qint8");
  float x = 1;
  CompressionContext ctx;
  ctx.plan = &plan;
  EXPECT_EQ(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kSum, ctx, opts(1)).code(),
            StatusCode::kInvalidArgument)
      << "error feedback needs a state";
  CompressionState state;
  ctx.state = &state;
  EXPECT_EQ(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kMax, ctx, opts(1)).code(),
            StatusCode::kInvalidArgument);
  ctx.tensor_id = std::uint64_t{1} << 56;
  EXPECT_EQ(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kSum, ctx, opts(1)).code(),
            StatusCode::kInvalidArgument);
  ctx.tensor_id = 0;
  EXPECT_TRUE(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kSum, ctx, opts(1)).is_ok());
}

TEST(CompressedAllReduce, RanksThatDisagreeOnThePlanFailInsteadOfMixing) {
  const int n = 3;
  algorithms::MemoryFabric fabric(n);
  const CompressionPlan a = must_plan("qint8"), b = must_plan("qint4");
  std::vector<CompressionState> states(n);
  auto in = inputs_for(n, 100, 1);
  const auto st = run_ranks(n, [&](int r) {
    CompressionContext ctx;
    ctx.plan = r == 0 ? &a : &b;
    ctx.state = &states[static_cast<std::size_t>(r)];
    return compressed_all_reduce(fabric.link(r), in[static_cast<std::size_t>(r)].data(), 100,
                                 ReduceOp::kSum, ctx, opts(1, 1 << 18, std::chrono::seconds(2)));
  });
  int mismatches = 0;
  for (const Status& s : st) {
    EXPECT_FALSE(s.is_ok());
    mismatches += s.code() == StatusCode::kMismatch;
  }
  EXPECT_GE(mismatches, 1);
}

// The same gradient every step: the running mean of the outputs must approach the exact
// mean. Error feedback makes the accumulated error bounded (O(1/T) in the mean); without
// it a biased codec (sign) keeps its bias and an unbiased one (qint4) shrinks only as
// 1/sqrt(T). (Sign without momentum correction: with it the outputs track the velocity.)
double mean_error_after(const std::string& spec, int steps) {
  const int n = 4;
  const std::size_t count = 2048;
  const CompressionPlan plan = must_plan(spec);
  std::vector<CompressionState> states(n);
  const auto in = inputs_for(n, count, 77);
  const auto want = exact(in, ReduceOp::kAvg);
  std::vector<double> acc(count, 0.0);
  for (int t = 0; t < steps; ++t) {
    const GroupRun g = run_group(plan, states, in, ReduceOp::kAvg, static_cast<std::uint64_t>(t));
    for (const Status& s : g.status) EXPECT_TRUE(s.is_ok());
    for (std::size_t i = 0; i < count; ++i) acc[i] += g.out[0][i];
  }
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double d = acc[i] / steps - want[i];
    err += d * d;
    norm += want[i] * want[i];
  }
  return std::sqrt(err / norm);
}

TEST(CompressedAllReduce, ErrorFeedbackDrivesTheMeanErrorDown) {
  const int steps = 40;
  for (const char* codec :
       {"sign:bucket=64,momentum=0", "qint4:bucket=64", "topk:density=0.05,warmup=0"}) {
    const double with = mean_error_after(std::string(codec) + ",ef=1", steps);
    const double without = mean_error_after(std::string(codec) + ",ef=0", steps);
    std::cout << codec << ": relative error of the " << steps << "-step mean, EF " << with
              << ", no EF " << without << "\n";
    EXPECT_LT(with, 0.35 * without) << codec;
    // With error feedback the error of the mean falls like 1/T.
    const double longer = mean_error_after(std::string(codec) + ",ef=1", 2 * steps);
    EXPECT_LT(longer, 0.7 * with) << codec;
  }
}

TEST(CompressedAllReduce, TopKSwitchesToDenseWhenTheUnionGetsDense) {
  const int n = 4;
  const std::size_t count = 3001;
  const auto in = inputs_for(n, count, 21);
  // density 0.3 x 4 ranks = 1.2 > 1: dense. dense_at=100 forces the sparse path.
  const CompressionPlan dense = must_plan("topk:density=0.3");
  const CompressionPlan sparse = must_plan("topk:density=0.3,dense_at=100");
  const CompressionPlan thin = must_plan("topk:density=0.2");  // 0.8 <= 1: sparse
  std::vector<CompressionState> s1(n), s2(n), s3(n);
  const GroupRun d = run_group(dense, s1, in, ReduceOp::kSum);
  const GroupRun s = run_group(sparse, s2, in, ReduceOp::kSum);
  const GroupRun t = run_group(thin, s3, in, ReduceOp::kSum);
  EXPECT_TRUE(d.stats[0].dense_fallback);
  EXPECT_FALSE(s.stats[0].dense_fallback);
  EXPECT_FALSE(t.stats[0].dense_fallback);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    ASSERT_TRUE(d.status[ur].is_ok() && s.status[ur].is_ok());
    ASSERT_TRUE(same_bits(d.out[0], d.out[ur]));
    ASSERT_TRUE(same_bits(s.out[0], s.out[ur]));
    // The same top-k payloads either way, so the same residuals.
    const std::uint64_t key = ErrorFeedback::key(7, CompressionState::kStageWorker);
    EXPECT_EQ(s1[ur].worker().residual_norm2(key), s2[ur].worker().residual_norm2(key));
  }
  for (std::size_t i = 0; i < count; ++i) EXPECT_NEAR(d.out[0][i], s.out[0][i], 1e-5);
  // Warm-up: density 0.25 for the first stage (x4 = 1.0, not above), then 0.0625.
  const CompressionPlan warm = must_plan("topk:density=0.01,warmup=5,dense_at=0.5");
  std::vector<CompressionState> s4(n);
  EXPECT_TRUE(run_group(warm, s4, in, ReduceOp::kSum, 0).stats[0].dense_fallback);
  EXPECT_FALSE(run_group(warm, s4, in, ReduceOp::kSum, 5).stats[0].dense_fallback);
}

// A rank-2 matrix and a bias: PowerSGD at rank 2 reproduces the mean exactly.
TEST(CompressedAllReduce, PowerSgdIsExactOnLowRankInput) {
  const std::size_t rows = 32, cols = 48, bias = 10, total = rows * cols + bias;
  const std::vector<MatrixShape> shapes = {{0, rows, cols}};
  const auto u = gaussian(rows * 2, 1), v = gaussian(cols * 2, 2);
  const CompressionPlan plan = must_plan("powersgd:rank=2");
  for (int n : {1, 2, 3, 4, 7}) {
    std::vector<std::vector<float>> in;
    for (int r = 0; r < n; ++r) {
      std::vector<float> g(total);
      const float a = 1.0f + 0.5f * static_cast<float>(r), b = 2.0f - 0.3f * static_cast<float>(r);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j)
          g[i * cols + j] = a * u[i * 2] * v[j * 2] + b * u[i * 2 + 1] * v[j * 2 + 1];
      for (std::size_t k = 0; k < bias; ++k) g[rows * cols + k] = static_cast<float>(r * 10 + k);
      in.push_back(std::move(g));
    }
    for (ReduceOp op : {ReduceOp::kAvg, ReduceOp::kSum}) {
      std::vector<CompressionState> states(static_cast<std::size_t>(n));
      const GroupRun g = run_group(plan, states, in, op, 0, 1 << 18, shapes);
      const auto want = exact(in, op);
      double scale = 0;
      for (double x : want) scale = std::max(scale, std::fabs(x));
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(g.status[static_cast<std::size_t>(r)].is_ok())
            << g.status[static_cast<std::size_t>(r)].to_string();
        ASSERT_TRUE(same_bits(g.out[0], g.out[static_cast<std::size_t>(r)]));
      }
      for (std::size_t i = 0; i < total; ++i)
        ASSERT_NEAR(g.out[0][i], want[i], 1e-4 * scale) << "n=" << n << " i=" << i;
      EXPECT_LT(g.stats[0].wire_bytes_sent, n == 1 ? 1 : total * 4);
    }
  }
}

}  // namespace
}  // namespace tributary::compression::collectives
