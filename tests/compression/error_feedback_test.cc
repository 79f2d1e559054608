// ErrorFeedback store: lifetime rules that the membership policy relies on.
#include "compression/error_feedback.h"

#include <gtest/gtest.h>

namespace tributary::compression {
namespace {

TEST(ErrorFeedback, ResidualsAreZeroedOnFirstUseAndKept) {
  ErrorFeedback ef;
  auto r = ef.residual(1, 4);
  ASSERT_EQ(r.size(), 4u);
  for (float v : r) EXPECT_EQ(v, 0.0f);
  r[2] = 3.0f;
  EXPECT_EQ(ef.residual(1, 4)[2], 3.0f);
  EXPECT_EQ(ef.residual(1, 4).data(), r.data());
  EXPECT_DOUBLE_EQ(ef.residual_norm2(1), 9.0);
  EXPECT_TRUE(ef.contains(1));
  EXPECT_FALSE(ef.contains(2));
}

TEST(ErrorFeedback, AShapeChangeDropsResidualAndMomentum) {
  ErrorFeedback ef;
  ef.residual(1, 4)[0] = 1.0f;
  ef.momentum(1, 4)[0] = 2.0f;
  EXPECT_EQ(ef.residual(1, 5)[0], 0.0f);
  EXPECT_EQ(ef.momentum(1, 5)[0], 0.0f);
}

TEST(ErrorFeedback, ResetAndResetAll) {
  ErrorFeedback ef;
  ef.residual(1, 4)[0] = 1.0f;
  ef.residual(2, 4)[0] = 1.0f;
  ef.reset(1);
  EXPECT_FALSE(ef.contains(1));
  EXPECT_EQ(ef.residual(2, 4)[0], 1.0f);
  ef.reset_all();
  EXPECT_EQ(ef.size(), 0u);
  EXPECT_EQ(ErrorFeedback::key(5, 1), (5u << 8) | 1u);
}

TEST(ErrorFeedback, SnapshotRestoresTheStateBeforeAnAbortedAttempt) {
  ErrorFeedback ef;
  ef.residual(1, 3)[1] = 5.0f;
  const auto snap = ef.snapshot(1);
  ef.residual(1, 3)[1] = -1.0f;
  ef.restore(snap);
  EXPECT_EQ(ef.residual(1, 3)[1], 5.0f);
  const auto absent = ef.snapshot(9);
  ef.residual(9, 2)[0] = 1.0f;
  ef.restore(absent);
  EXPECT_FALSE(ef.contains(9));
}

}  // namespace
}  // namespace tributary::compression
