// Rate-limited refusal lines: a burst per key and window, then a count of what was held back.
#include "core/log_limiter.h"

#include <gtest/gtest.h>

#include <vector>

namespace tributary {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(LogLimiter, BurstThenSuppressedThenACountInTheNextWindow) {
  FakeClock clock;
  LogLimiter limiter(2, seconds(10));
  std::vector<std::string> lines;
  Logger log("t", [&](const LogRecord& r) { lines.emplace_back(r.message); });
  for (int i = 0; i < 1000; ++i) limiter.log(log, LogLevel::kWarn, "auth", "refused", clock.now());
  EXPECT_EQ(lines, (std::vector<std::string>{"refused", "refused"}));
  EXPECT_EQ(limiter.suppressed_total(), 998u);
  clock.advance(seconds(10));
  EXPECT_TRUE(limiter.log(log, LogLevel::kWarn, "auth", "refused", clock.now()));
  EXPECT_EQ(lines.back(), "refused (998 similar lines suppressed)");
  EXPECT_TRUE(limiter.log(log, LogLevel::kWarn, "auth", "refused", clock.now()));
  EXPECT_EQ(lines.back(), "refused") << "the count is given once";
}

TEST(LogLimiter, FlushReportsWhatAWindowSuppressed) {
  FakeClock clock;
  LogLimiter limiter(1, seconds(10));
  std::vector<std::string> lines;
  Logger log("t", [&](const LogRecord& r) { lines.emplace_back(r.message); });
  for (int i = 0; i < 3; ++i)
    limiter.log(log, LogLevel::kWarn, "auth", "refused " + std::to_string(i), clock.now());
  limiter.flush(log, LogLevel::kWarn, clock.now());
  EXPECT_EQ(lines.size(), 1u) << "nothing to say before the window ends";
  clock.advance(seconds(10));
  limiter.flush(log, LogLevel::kWarn, clock.now());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "2 similar lines suppressed in 10 s; the last: refused 2");
  limiter.flush(log, LogLevel::kWarn, clock.now());
  EXPECT_EQ(lines.size(), 2u) << "said once";
}

TEST(LogLimiter, KeysAreIndependentAndBounded) {
  FakeClock clock;
  LogLimiter limiter(1, seconds(10), 4);
  EXPECT_TRUE(limiter.admit("a", clock.now()));
  EXPECT_FALSE(limiter.admit("a", clock.now()));
  EXPECT_TRUE(limiter.admit("b", clock.now())) << "another kind of refusal has its own budget";
  // A flood of distinct keys keeps at most 4 groups: the oldest is forgotten (and so may
  // log again), the memory stays bounded.
  for (int i = 0; i < 10000; ++i) limiter.admit("k" + std::to_string(i), clock.now());
  EXPECT_TRUE(limiter.admit("a", clock.now() + milliseconds(1)));
}

}  // namespace
}  // namespace tributary
