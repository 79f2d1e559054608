// Compressed all-reduce over the in-memory fabric: ranks are threads. Sweeps group sizes
// 1..8, odd counts and many-piece chunking for every scheme; checks that every rank holds
// the same bits, that the error stays within the codec's bound, that error feedback pays
// over steps, the top-k dense switch, PowerSGD on low-rank input, and the residual policy
// on view changes, rejoin and aborted attempts.
#include "compression/compressed_collectives.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/memory_link.h"
#include "algorithms/partition.h"
#include "tests/support/dying_link.h"
#include "tests/support/rank_threads.h"

namespace tributary::compression {
namespace {

using tributary::testing::DyingLink;
using tributary::testing::run_ranks;

std::vector<float> gaussian(std::size_t n, std::uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

CompressionPlan must_plan(const std::string& spec) {
  auto p = CompressionPlan::parse(spec);
  EXPECT_TRUE(p.is_ok()) << spec << ": " << p.status().to_string();
  return p.is_ok() ? std::move(p).value() : CompressionPlan{};
}

algorithms::CollectiveOptions opts(std::uint64_t seq, std::size_t chunk_bytes = 256 * 1024,
                                   std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  algorithms::CollectiveOptions o;
  o.seq = seq;
  o.chunk_bytes = chunk_bytes;
  o.deadline = Deadline::after(deadline);
  return o;
}

// The context every test collective uses: tensor `tensor`, codec seed 99.
CompressionContext context(const CompressionPlan& plan, CompressionState& state, std::uint64_t step,
                           std::span<const MatrixShape> shapes = {}, std::uint64_t tensor = 7) {
  CompressionContext ctx;
  ctx.plan = &plan;
  ctx.state = &state;
  ctx.tensor_id = tensor;
  ctx.step = step;
  ctx.seed = 99;
  ctx.shapes = shapes;
  return ctx;
}

// One collective over a fresh fabric of n ranks. inputs[r] is rank r's tensor; returns
// every rank's output (and stats) and expects success.
struct GroupRun {
  std::vector<std::vector<float>> out;
  std::vector<CompressionStats> stats;
  std::vector<Status> status;
};
GroupRun run_group(const CompressionPlan& plan, std::vector<CompressionState>& states,
                   const std::vector<std::vector<float>>& inputs, ReduceOp op,
                   std::uint64_t step = 0, std::size_t chunk_bytes = 256 * 1024,
                   std::span<const MatrixShape> shapes = {}, std::uint64_t tensor = 7) {
  const int n = static_cast<int>(inputs.size());
  algorithms::MemoryFabric fabric(n);
  GroupRun g;
  g.out = inputs;
  g.stats.resize(inputs.size());
  g.status = run_ranks(n, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    CompressionContext ctx = context(plan, states[ur], step, shapes, tensor);
    ctx.stats = &g.stats[ur];
    return compressed_all_reduce(fabric.link(r), g.out[ur].data(), g.out[ur].size(), op, ctx,
                                 opts(step + 1, chunk_bytes));
  });
  return g;
}

std::vector<std::vector<float>> inputs_for(int n, std::size_t count, std::uint32_t seed) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < n; ++r)
    in.push_back(gaussian(count, seed * 100 + static_cast<std::uint32_t>(r)));
  return in;
}

std::vector<double> exact(const std::vector<std::vector<float>>& in, ReduceOp op) {
  std::vector<double> s(in[0].size(), 0.0);
  for (const auto& v : in)
    for (std::size_t i = 0; i < v.size(); ++i) s[i] += v[i];
  if (op == ReduceOp::kAvg)
    for (double& x : s) x /= static_cast<double>(in.size());
  return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

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

TEST(CompressedAllReduce, PlanParsing) {
  EXPECT_TRUE(must_plan("qint8").error_feedback);
  EXPECT_FALSE(must_plan("qint8:ef=0").error_feedback);
  EXPECT_FALSE(must_plan("float16").error_feedback);
  EXPECT_TRUE(must_plan("bfloat16:ef=1").error_feedback);
  EXPECT_EQ(must_plan("topk:density=0.01").kind, CompressionPlan::Kind::kSparse);
  EXPECT_EQ(must_plan("sign").kind, CompressionPlan::Kind::kQuantized);
  const CompressionPlan ps = must_plan("powersgd:rank=3,warm=0");
  EXPECT_EQ(ps.kind, CompressionPlan::Kind::kPowerSgd);
  EXPECT_EQ(ps.powersgd.rank, 3u);
  EXPECT_FALSE(ps.powersgd.warm_start);
  EXPECT_EQ(must_plan("qint8:bucket=512,ef=1").spec, must_plan("qint8").spec);
  for (const char* bad : {"qint9", "qint8:ef=2", "qint8:dense_at=2", "powersgd:rank=0",
                          "powersgd:bucket=3", "float32:ef=1", "topk:dense_at=-1"}) {
    EXPECT_FALSE(CompressionPlan::parse(bad).is_ok()) << bad;
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

// ---- residual policy ------------------------------------------------------------------

constexpr std::uint64_t kTensor = 7;
const std::uint64_t kWorkerKey = ErrorFeedback::key(kTensor, CompressionState::kStageWorker);

std::vector<float> worker_residual(CompressionState& s, std::size_t count) {
  auto r = s.worker().residual(kWorkerKey, count);
  return {r.begin(), r.end()};
}

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
      const auto snap = s.snapshot(kTensor);
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
                               ? before[i] + snap.owner.residual[i - mine.begin]
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
        const auto snap = s.snapshot(kTensor);
        if (snap.owner_present) {
          for (std::size_t i = 0; i < snap.owner.residual.size(); ++i)
            held[snap.owner.offset + i] += snap.owner.residual[i];
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
  EXPECT_TRUE(s.snapshot(9).powersgd.has_value());
  s.on_rejoin();
  EXPECT_FALSE(s.has_owner_residual(kTensor));
  EXPECT_FALSE(s.worker().contains(kWorkerKey));
  EXPECT_FALSE(s.snapshot(9).powersgd.has_value());
}

// An attempt that dies part-way leaves the residuals as they were, so re-running it
// in the next epoch gives exactly what a clean first attempt gives: nothing counted twice.
TEST(ResidualPolicy, AbortedAttemptRestoresAndRerunMatchesACleanRun) {
  const int n = 4;
  const std::size_t count = 2000;
  const std::vector<MatrixShape> shapes = {{0, 40, 40}};
  for (const char* spec : {"qint4:bucket=64", "sign:bucket=64", "topk:density=0.05",
                           "topk:density=0.3", "powersgd:rank=2"}) {
    for (int allowed : {0, 3, 9}) {
      SCOPED_TRACE(std::string(spec) + " dies after " + std::to_string(allowed) + " sends");
      const CompressionPlan plan = must_plan(spec);
      std::vector<CompressionState> clean(n), faulty(n);
      // Step 0 everywhere so residuals are non-zero before the attempt that fails.
      const auto in0 = inputs_for(n, count, 50);
      (void)run_group(plan, clean, in0, ReduceOp::kAvg, 0, 512, shapes);
      (void)run_group(plan, faulty, in0, ReduceOp::kAvg, 0, 512, shapes);
      const auto in1 = inputs_for(n, count, 51);

      std::vector<CompressionState::Snapshot> before;
      for (auto& s : faulty) before.push_back(s.snapshot(7));
      {
        algorithms::MemoryFabric fabric(n);
        std::vector<std::vector<float>> data = in1;
        const auto st = run_ranks(n, [&](int r) {
          DyingLink dying(fabric, r, allowed);
          algorithms::Link& link = r == 2 ? static_cast<algorithms::Link&>(dying) : fabric.link(r);
          return compressed_all_reduce(
              link, data[static_cast<std::size_t>(r)].data(), count, ReduceOp::kAvg,
              context(plan, faulty[static_cast<std::size_t>(r)], 1, shapes),
              opts(2, 512, std::chrono::milliseconds(700)));
        });
        int failed = 0;
        for (int r = 0; r < n; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          if (st[ur].is_ok()) continue;
          ++failed;
          const auto now = faulty[ur].snapshot(7);
          EXPECT_TRUE(same_bits(now.worker.residual, before[ur].worker.residual)) << "rank " << r;
          EXPECT_TRUE(same_bits(now.owner.residual, before[ur].owner.residual)) << "rank " << r;
          EXPECT_EQ(now.powersgd.has_value(), before[ur].powersgd.has_value());
          if (now.powersgd) {
            EXPECT_TRUE(
                same_bits(now.powersgd->state.residual, before[ur].powersgd->state.residual));
          }
        }
        if (allowed == 0) {
          EXPECT_GE(failed, 1);
        }
        // A rank that finished (kOk) in a step the cluster then abandons undoes it by hand.
        for (int r = 0; r < n; ++r) {
          if (st[static_cast<std::size_t>(r)].is_ok())
            faulty[static_cast<std::size_t>(r)].restore(before[static_cast<std::size_t>(r)]);
        }
      }
      const GroupRun a = run_group(plan, clean, in1, ReduceOp::kAvg, 1, 512, shapes);
      const GroupRun b = run_group(plan, faulty, in1, ReduceOp::kAvg, 1, 512, shapes);
      for (int r = 0; r < n; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        ASSERT_TRUE(a.status[ur].is_ok() && b.status[ur].is_ok());
        EXPECT_TRUE(same_bits(a.out[ur], b.out[ur])) << "rank " << r;
        EXPECT_TRUE(same_bits(clean[ur].snapshot(7).worker.residual,
                              faulty[ur].snapshot(7).worker.residual));
        EXPECT_TRUE(
            same_bits(clean[ur].snapshot(7).owner.residual, faulty[ur].snapshot(7).owner.residual));
      }
    }
  }
}

// A rank that dies after its first piece went out (top-k pieces go out as they are
// encoded) leaves every rank that failed with the residual it had before the call.
TEST(ResidualPolicy, TopKDyingBetweenPiecesRestoresTheResidual) {
  const int n = 3;
  const std::size_t count = (std::size_t{1} << 21) + 99;
  const CompressionPlan plan = must_plan("topk:density=0.01");
  std::vector<CompressionState> states(n);
  (void)run_group(plan, states, inputs_for(n, count, 60), ReduceOp::kAvg, 0);
  std::vector<CompressionState::Snapshot> before;
  for (auto& s : states) before.push_back(s.snapshot(7));
  algorithms::MemoryFabric fabric(n);
  std::vector<std::vector<float>> data = inputs_for(n, count, 61);
  // Piece 0 to both peers is 4 sends (size word + payload each); the 7th send dies.
  const auto st = run_ranks(n, [&](int r) {
    DyingLink dying(fabric, r, 6);
    algorithms::Link& link = r == 1 ? static_cast<algorithms::Link&>(dying) : fabric.link(r);
    return compressed_all_reduce(link, data[static_cast<std::size_t>(r)].data(), count,
                                 ReduceOp::kAvg,
                                 context(plan, states[static_cast<std::size_t>(r)], 1),
                                 opts(2, 256 * 1024, std::chrono::milliseconds(2000)));
  });
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    ASSERT_FALSE(st[ur].is_ok()) << "rank " << r << " finished although rank 1 died mid-way";
    EXPECT_TRUE(same_bits(states[ur].snapshot(7).worker.residual, before[ur].worker.residual))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace tributary::compression
