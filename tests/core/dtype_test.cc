#include "core/dtype.h"

#include <gtest/gtest.h>

namespace tributary {
namespace {

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    const auto parsed = parse_dtype(to_string(t));
    ASSERT_TRUE(parsed.has_value()) << to_string(t);
    EXPECT_EQ(*parsed, t);
    EXPECT_GT(dtype_size(t), 0u);
  }
  for (int i = 0; i < kNumReduceOps; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    EXPECT_EQ(parse_reduce_op(to_string(op)), op);
  }
  EXPECT_FALSE(parse_dtype("float128").has_value());
  EXPECT_FALSE(parse_reduce_op("xor").has_value());
  EXPECT_FALSE(is_valid_dtype(kNumDTypes));
  EXPECT_TRUE(is_valid_dtype(0));
}

}  // namespace
}  // namespace tributary
