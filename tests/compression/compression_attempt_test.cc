// All-or-nothing residuals: CompressionAttempt (commit, rollback, re-runs, view changes
// while open, one at a time) and compressed_all_reduce's own rollback when a rank dies
// part-way.
#include "compression/collectives/compression_attempt.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/compression/collectives_test_util.h"
#include "tests/support/dying_link.h"

namespace tributary::compression::collectives {
namespace {

using namespace testing;

using tributary::testing::DyingLink;

// An attempt that dies part-way leaves the residuals as they were, so re-running it
// in the next epoch gives exactly what a clean first attempt gives: nothing counted twice.
// Every rank runs under an attempt of its own that it never commits: a rank that failed is
// rolled back by the call itself (checked while the attempt is still open), and a rank
// that finished (kOk) in a step the cluster then abandons is rolled back when its attempt
// ends.
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

      std::vector<TensorState> before, after_failure(n);
      for (auto& s : faulty) before.push_back(capture(s));
      algorithms::MemoryFabric fabric(n);
      std::vector<std::vector<float>> data = in1;
      const auto st = run_ranks(n, [&](int r) {
        const auto ur = static_cast<std::size_t>(r);
        DyingLink dying(fabric, r, allowed);
        algorithms::Link& link = r == 2 ? static_cast<algorithms::Link&>(dying) : fabric.link(r);
        CompressionAttempt attempt(faulty[ur], kTensor);
        CompressionContext ctx = context(plan, faulty[ur], 1, shapes);
        ctx.attempt = &attempt;
        Status s = compressed_all_reduce(link, data[ur].data(), count, ReduceOp::kAvg, ctx,
                                         opts(2, 512, std::chrono::milliseconds(700)));
        if (!s.is_ok()) after_failure[ur] = capture(faulty[ur]);
        return s;
      });
      int failed = 0;
      for (int r = 0; r < n; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        if (!st[ur].is_ok()) {
          ++failed;
          EXPECT_TRUE(same_state(after_failure[ur], before[ur])) << "rank " << r << " failed";
        }
        EXPECT_TRUE(same_state(capture(faulty[ur]), before[ur])) << "rank " << r;
      }
      if (allowed == 0) {
        EXPECT_GE(failed, 1);
      }
      const GroupRun a = run_group(plan, clean, in1, ReduceOp::kAvg, 1, 512, shapes);
      const GroupRun b = run_group(plan, faulty, in1, ReduceOp::kAvg, 1, 512, shapes);
      for (int r = 0; r < n; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        ASSERT_TRUE(a.status[ur].is_ok() && b.status[ur].is_ok());
        EXPECT_TRUE(same_bits(a.out[ur], b.out[ur])) << "rank " << r;
        EXPECT_TRUE(same_state(capture(clean[ur]), capture(faulty[ur]))) << "rank " << r;
      }
    }
  }
}

// A rank that dies after its first piece went out (top-k pieces go out as they are
// encoded) leaves every rank that failed with the residual it had before the call.
TEST(ResidualPolicy, TopKDyingBetweenPiecesRestoresTheResidual) {
  const int n = 3;
  const std::size_t count = (std::size_t{1} << 21) + 99;
  const CompressionPlan plan = must_plan("topk:density=0.01,warmup=0");
  std::vector<CompressionState> states(n);
  (void)run_group(plan, states, inputs_for(n, count, 60), ReduceOp::kAvg, 0);
  std::vector<TensorState> before;
  for (auto& s : states) before.push_back(capture(s));
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
    EXPECT_TRUE(same_state(capture(states[ur]), before[ur])) << "rank " << r;
  }
}

// ---- the attempt object --------------------------------------------------------------

// Codecs that touch each kind of state: stage 1 and 2 residuals, top-k momentum, PowerSGD.
const char* const kStatefulSpecs[] = {"qint4:bucket=64", "topk:density=0.05,momentum=0.9",
                                      "powersgd:rank=2"};
const std::vector<MatrixShape> kShapes = {{0, 30, 40}};
constexpr int kRanks = 3;
constexpr std::size_t kCount = 1500;

// Pointers to one attempt per rank, opened on `states` for kTensor.
struct GroupAttempt {
  explicit GroupAttempt(std::vector<CompressionState>& states) {
    for (auto& s : states) owned.push_back(std::make_unique<CompressionAttempt>(s, kTensor));
    for (auto& a : owned) ptrs.push_back(a.get());
  }
  void commit() {
    for (auto* a : ptrs) a->commit();
  }
  std::vector<std::unique_ptr<CompressionAttempt>> owned;
  std::vector<CompressionAttempt*> ptrs;
};

// Step 0 outside any attempt, so every kind of state is non-zero before the attempt.
std::vector<CompressionState> warmed(const CompressionPlan& plan) {
  std::vector<CompressionState> states(kRanks);
  (void)run_group(plan, states, inputs_for(kRanks, kCount, 1), ReduceOp::kAvg, 0, 2048, kShapes);
  return states;
}

GroupRun step_one(const CompressionPlan& plan, std::vector<CompressionState>& states,
                  std::span<CompressionAttempt* const> attempts = {}) {
  GroupRun g = run_group(plan, states, inputs_for(kRanks, kCount, 2), ReduceOp::kAvg, 1, 2048,
                         kShapes, kTensor, attempts);
  for (const Status& s : g.status) EXPECT_TRUE(s.is_ok()) << s.to_string();
  return g;
}

TEST(CompressionAttempt, CommitKeepsWhatTheRunChanged) {
  for (const char* spec : kStatefulSpecs) {
    SCOPED_TRACE(spec);
    const CompressionPlan plan = must_plan(spec);
    std::vector<CompressionState> plain = warmed(plan), attempted = warmed(plan);
    const GroupRun want = step_one(plan, plain);
    GroupAttempt attempt(attempted);
    const GroupRun got = step_one(plan, attempted, attempt.ptrs);
    attempt.commit();
    for (std::size_t r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(same_bits(want.out[r], got.out[r])) << "rank " << r;
      EXPECT_TRUE(same_state(capture(plain[r]), capture(attempted[r]))) << "rank " << r;
    }
  }
}

TEST(CompressionAttempt, EndingWithoutCommitPutsEverythingBack) {
  for (const char* spec : kStatefulSpecs) {
    SCOPED_TRACE(spec);
    const CompressionPlan plan = must_plan(spec);
    std::vector<CompressionState> states = warmed(plan);
    std::vector<TensorState> before;
    for (const auto& s : states) before.push_back(capture(s));
    {
      GroupAttempt attempt(states);
      (void)step_one(plan, states, attempt.ptrs);
      for (std::size_t r = 0; r < kRanks; ++r)
        ASSERT_FALSE(same_state(capture(states[r]), before[r])) << "the run changed nothing";
    }
    for (std::size_t r = 0; r < kRanks; ++r)
      EXPECT_TRUE(same_state(capture(states[r]), before[r])) << "rank " << r;
  }
  // State that did not exist before the attempt does not exist after it.
  std::vector<CompressionState> fresh(kRanks);
  {
    GroupAttempt attempt(fresh);
    (void)step_one(must_plan("powersgd:rank=2"), fresh, attempt.ptrs);
    (void)step_one(must_plan("topk:density=0.05,momentum=0.9"), fresh, attempt.ptrs);
    ASSERT_TRUE(fresh[0].worker().contains(kWorkerKey));
  }
  for (const auto& s : fresh) {
    EXPECT_FALSE(s.worker().contains(kWorkerKey));
    EXPECT_EQ(s.find_powersgd(kTensor), nullptr);
  }
}

// The runtime's retry: a run returned kOk, the cluster abandoned the step, and the
// collective runs again under the same attempt (with or without an explicit rollback in
// between). What is committed equals one clean run: the first run counts for nothing.
TEST(CompressionAttempt, ARunAgainUnderTheSameAttemptStartsFromWhereItOpened) {
  for (const char* spec : kStatefulSpecs) {
    for (bool explicit_rollback : {false, true}) {
      SCOPED_TRACE(std::string(spec) + (explicit_rollback ? " rollback()" : " re-run"));
      const CompressionPlan plan = must_plan(spec);
      std::vector<CompressionState> clean = warmed(plan), retried = warmed(plan);
      const GroupRun want = step_one(plan, clean);
      GroupAttempt attempt(retried);
      (void)step_one(plan, retried, attempt.ptrs);
      if (explicit_rollback) {
        for (auto* a : attempt.ptrs) a->rollback();
      }
      const GroupRun got = step_one(plan, retried, attempt.ptrs);
      attempt.commit();
      for (std::size_t r = 0; r < kRanks; ++r) {
        EXPECT_TRUE(same_bits(want.out[r], got.out[r])) << "rank " << r;
        EXPECT_TRUE(same_state(capture(clean[r]), capture(retried[r]))) << "rank " << r;
      }
    }
  }
}

// A view change that arrives while the attempt is open (the runtime moves to a new view
// before it knows the outcome) folds the owner residual that the outcome leaves: the
// committed run's, or the one from before a rolled-back run. Either way the state equals
// the outcome followed by the view change.
TEST(CompressionAttempt, AViewChangeWhileOpenFoldsWhatTheOutcomeLeaves) {
  const CompressionPlan plan = must_plan("qint4:bucket=64");
  const auto shrink = [](std::vector<CompressionState>& states) {
    for (int r = 0; r < kRanks; ++r) states[static_cast<std::size_t>(r)].on_view_change(2, r % 2);
  };
  for (bool commit : {true, false}) {
    SCOPED_TRACE(commit ? "committed" : "rolled back");
    std::vector<CompressionState> want = warmed(plan), got = warmed(plan);
    if (commit) (void)step_one(plan, want);
    shrink(want);
    {
      GroupAttempt attempt(got);
      (void)step_one(plan, got, attempt.ptrs);
      shrink(got);
      EXPECT_TRUE(got[0].has_owner_residual(kTensor)) << "folded before the outcome was known";
      if (commit) attempt.commit();
    }
    for (std::size_t r = 0; r < kRanks; ++r) {
      EXPECT_EQ(got[r].has_owner_residual(kTensor), want[r].has_owner_residual(kTensor));
      EXPECT_TRUE(same_state(capture(want[r]), capture(got[r]))) << "rank " << r;
    }
  }
}

TEST(CompressionAttempt, RejoinDropsWhatAnOpenAttemptWouldPutBack) {
  const CompressionPlan plan = must_plan("powersgd:rank=2");
  std::vector<CompressionState> states = warmed(plan);
  {
    GroupAttempt attempt(states);
    (void)step_one(plan, states, attempt.ptrs);
    for (auto& s : states) s.on_rejoin();
  }
  for (const auto& s : states) EXPECT_EQ(s.find_powersgd(kTensor), nullptr);
}

// One attempt at a time per state; attempts one after another are fine.
TEST(CompressionAttempt, OneAtATime) {
  const CompressionPlan plan = must_plan("qint8");
  CompressionState state;
  algorithms::MemoryFabric fabric(1);
  float x = 1;
  {
    CompressionAttempt first(state, kTensor);
    EXPECT_EQ(state.open_attempt(), &first);
    EXPECT_DEATH(CompressionAttempt second(state, kTensor), "still open");
    // Without the open attempt in the context, or with it for another tensor: refused.
    CompressionContext ctx = context(plan, state, 0);
    EXPECT_EQ(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kSum, ctx, opts(1)).code(),
              StatusCode::kInvalidArgument);
    ctx.attempt = &first;
    ctx.tensor_id = kTensor + 1;
    EXPECT_EQ(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kSum, ctx, opts(1)).code(),
              StatusCode::kInvalidArgument);
    ctx.tensor_id = kTensor;
    EXPECT_TRUE(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kSum, ctx, opts(1)).is_ok());
    first.commit();
    EXPECT_EQ(state.open_attempt(), nullptr);
    EXPECT_DEATH(first.commit(), "committed twice");
    // A committed attempt no longer blocks the state, even before it goes out of scope.
    CompressionAttempt next(state, kTensor);
    EXPECT_EQ(state.open_attempt(), &next);
  }
  EXPECT_EQ(state.open_attempt(), nullptr);
  CompressionContext ctx = context(plan, state, 0);
  EXPECT_TRUE(compressed_all_reduce(fabric.link(0), &x, 1, ReduceOp::kSum, ctx, opts(2)).is_ok());
}

}  // namespace
}  // namespace tributary::compression::collectives
