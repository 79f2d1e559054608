#include <gtest/gtest.h>

#include <atomic>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {
namespace {

class BarrierSweep : public ::testing::TestWithParam<int> {};

// A rank may leave barrier k only after every rank has entered it. One rank's messages are
// delayed, so the others would run ahead if any round were skipped.
TEST_P(BarrierSweep, NoRankLeavesBeforeAllEnter) {
  const int n = GetParam();
  constexpr int kRounds = 5;
  algorithms::MemoryFabric fabric(n);
  fabric.set_delay(n / 2, std::chrono::milliseconds(2));
  std::atomic<int> entered[kRounds] = {};
  std::atomic<int> early{0};
  const auto statuses = run_ranks(n, [&](int r) {
    for (int k = 0; k < kRounds; ++k) {
      entered[k].fetch_add(1);
      algorithms::CollectiveOptions options;
      options.seq = static_cast<std::uint64_t>(k);
      options.deadline = Deadline::after(std::chrono::seconds(20));
      TRIB_RETURN_IF_ERROR(barrier(fabric.link(r), options));
      if (entered[k].load() != n) early.fetch_add(1);
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].is_ok()) << statuses[r].to_string();
  EXPECT_EQ(early.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Worlds, BarrierSweep, ::testing::Range(1, kMaxWorld + 1),
                         [](const auto& info) { return world_name(info.param); });

}  // namespace
}  // namespace tributary::testing
