// Shared helpers for the compressed-collective tests (compression/collectives/): plans,
// options, a group of ranks as threads over a MemoryFabric, exact references, and a copy
// of one tensor's state to compare before and after.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "algorithms/memory_link.h"
#include "compression/collectives/compressed_all_reduce.h"
#include "tests/compression/test_util.h"
#include "tests/support/rank_threads.h"

namespace tributary::compression::collectives::testing {

using compression::testing::gaussian;
using tributary::testing::run_ranks;

constexpr std::uint64_t kTensor = 7;
inline const std::uint64_t kWorkerKey = ErrorFeedback::key(kTensor, CompressionState::kStageWorker);

inline CompressionPlan must_plan(const std::string& spec) {
  auto p = CompressionPlan::parse(spec);
  EXPECT_TRUE(p.is_ok()) << spec << ": " << p.status().to_string();
  return p.is_ok() ? std::move(p).value() : CompressionPlan{};
}

inline algorithms::CollectiveOptions opts(
    std::uint64_t seq, std::size_t chunk_bytes = 256 * 1024,
    std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  algorithms::CollectiveOptions o;
  o.seq = seq;
  o.chunk_bytes = chunk_bytes;
  o.deadline = Deadline::after(deadline);
  return o;
}

// The context every test collective uses: tensor `tensor`, codec seed 99.
inline CompressionContext context(const CompressionPlan& plan, CompressionState& state,
                                  std::uint64_t step, std::span<const MatrixShape> shapes = {},
                                  std::uint64_t tensor = kTensor) {
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
// every rank's output, stats and status. With `attempts`, rank r runs under
// (*attempts)[r].
struct GroupRun {
  std::vector<std::vector<float>> out;
  std::vector<CompressionStats> stats;
  std::vector<Status> status;
};
inline GroupRun run_group(const CompressionPlan& plan, std::vector<CompressionState>& states,
                          const std::vector<std::vector<float>>& inputs, ReduceOp op,
                          std::uint64_t step = 0, std::size_t chunk_bytes = 256 * 1024,
                          std::span<const MatrixShape> shapes = {}, std::uint64_t tensor = kTensor,
                          std::span<CompressionAttempt* const> attempts = {}) {
  const int n = static_cast<int>(inputs.size());
  algorithms::MemoryFabric fabric(n);
  GroupRun g;
  g.out = inputs;
  g.stats.resize(inputs.size());
  g.status = run_ranks(n, [&](int r) {
    const auto ur = static_cast<std::size_t>(r);
    CompressionContext ctx = context(plan, states[ur], step, shapes, tensor);
    ctx.stats = &g.stats[ur];
    if (!attempts.empty()) ctx.attempt = attempts[ur];
    return compressed_all_reduce(fabric.link(r), g.out[ur].data(), g.out[ur].size(), op, ctx,
                                 opts(step + 1, chunk_bytes));
  });
  return g;
}

inline std::vector<std::vector<float>> inputs_for(int n, std::size_t count, std::uint32_t seed) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < n; ++r)
    in.push_back(gaussian(count, seed * 100 + static_cast<std::uint32_t>(r)));
  return in;
}

inline std::vector<double> exact(const std::vector<std::vector<float>>& in, ReduceOp op) {
  std::vector<double> s(in[0].size(), 0.0);
  for (const auto& v : in)
    for (std::size_t i = 0; i < v.size(); ++i) s[i] += v[i];
  if (op == ReduceOp::kAvg)
    for (double& x : s) x /= static_cast<double>(in.size());
  return s;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

inline std::vector<float> worker_residual(CompressionState& s, std::size_t count) {
  auto r = s.worker().residual(kWorkerKey, count);
  return {r.begin(), r.end()};
}

// One tensor's state, copied.
struct TensorState {
  ErrorFeedback::Snapshot worker;
  std::optional<OwnerResidual> owner;
  std::optional<PowerSgd::Snapshot> powersgd;
};
inline TensorState capture(const CompressionState& s, std::uint64_t tensor = kTensor) {
  TensorState t;
  t.worker = s.worker().snapshot(ErrorFeedback::key(tensor, CompressionState::kStageWorker));
  if (const OwnerResidual* o = s.find_owner_residual(tensor)) t.owner = *o;
  if (const PowerSgd* p = s.find_powersgd(tensor)) t.powersgd = p->snapshot();
  return t;
}

// Bitwise equality of two copies, naming the first part that differs.
inline ::testing::AssertionResult same_state(const TensorState& a, const TensorState& b) {
  if (a.worker.present != b.worker.present || !same_bits(a.worker.residual, b.worker.residual))
    return ::testing::AssertionFailure() << "the stage-1 residual differs";
  if (!same_bits(a.worker.momentum, b.worker.momentum))
    return ::testing::AssertionFailure() << "the top-k momentum differs";
  if (a.owner.has_value() != b.owner.has_value() ||
      (a.owner &&
       (a.owner->group_size != b.owner->group_size || a.owner->slice != b.owner->slice ||
        a.owner->offset != b.owner->offset || !same_bits(a.owner->residual, b.owner->residual))))
    return ::testing::AssertionFailure() << "the stage-2 (owner) residual differs";
  if (a.powersgd.has_value() != b.powersgd.has_value() ||
      (a.powersgd &&
       (!same_bits(a.powersgd->residual, b.powersgd->residual) ||
        !same_bits(a.powersgd->q, b.powersgd->q) || a.powersgd->step != b.powersgd->step)))
    return ::testing::AssertionFailure() << "the PowerSGD state differs";
  return ::testing::AssertionSuccess();
}

}  // namespace tributary::compression::collectives::testing
