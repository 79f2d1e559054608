#include "core/status.h"
#include "core/check.h"

#include <gtest/gtest.h>

namespace tributary {
namespace {

Status fails() { return error(StatusCode::kPeerLost, "rank 3 closed the link"); }
Status propagates() {
  TRIB_RETURN_IF_ERROR(fails());
  return Status::ok();
}

TEST(Status, CarriesCodeAndMessage) {
  const Status s = propagates();
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kPeerLost);
  EXPECT_EQ(s.to_string(), "peer lost: rank 3 closed the link");
  EXPECT_TRUE(Status::ok().is_ok());
}

Result<int> half(int v) {
  if (v % 2 != 0) return error(StatusCode::kInvalidArgument, "odd");
  return v / 2;
}
Result<int> quarter(int v) {
  TRIB_ASSIGN_OR_RETURN(const int h, half(v));
  TRIB_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(Result, AssignOrReturnUnwrapsOrPropagates) {
  EXPECT_EQ(quarter(12).value(), 3);
  EXPECT_EQ(quarter(6).status().message(), "odd") << "the second unwrap fails";
  EXPECT_EQ(quarter(5).status().code(), StatusCode::kInvalidArgument);
}

TEST(Result, HoldsValueOrStatus) {
  Result<int> good = 7;
  Result<int> bad = error(StatusCode::kTimedOut, "no progress for 2s");
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(*good, 7);
  EXPECT_TRUE(good.status().is_ok());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kTimedOut);
}

TEST(CheckDeathTest, ReportsFileAndLine) {
  EXPECT_DEATH({ TRIB_CHECK(1 + 1 == 3) << "arithmetic"; },
               "check failed at .*status_test.cc:[0-9]+: 1 \\+ 1 == 3: arithmetic");
}

}  // namespace
}  // namespace tributary
