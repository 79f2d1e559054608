// The commit round (algorithms/agreement.h): a direct round up to kDirectAgreementMax
// members and a barrier above; no member completes it before every member entered it, and
// a member that dies before entering makes every other member fail instead of commit.
#include <gtest/gtest.h>

#include <atomic>

#include "algorithms/agreement.h"
#include "algorithms/memory_link.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {
namespace {

class AgreementSweep : public ::testing::TestWithParam<int> {};

TEST_P(AgreementSweep, NoMemberCompletesBeforeAllEntered) {
  const int n = GetParam();
  algorithms::MemoryFabric fabric(n);
  fabric.set_delay(n - 1, std::chrono::milliseconds(2));
  std::atomic<int> entered{0};
  std::atomic<int> early{0};
  const auto statuses = run_ranks(n, [&](int r) {
    entered.fetch_add(1);
    algorithms::CollectiveOptions options;
    options.seq = 9;
    options.deadline = Deadline::after(std::chrono::seconds(20));
    TRIB_RETURN_IF_ERROR(algorithms::agreement_round(fabric.link(r), options));
    if (entered.load() != n) early.fetch_add(1);
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].is_ok()) << statuses[r].to_string();
  EXPECT_EQ(early.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Worlds, AgreementSweep, ::testing::Range(1, kMaxWorld + 1),
                         [](const auto& info) { return world_name(info.param); });

TEST(Agreement, AMemberThatNeverEntersFailsEveryOther) {
  for (int n : {3, algorithms::kDirectAgreementMax, algorithms::kDirectAgreementMax + 3}) {
    algorithms::MemoryFabric fabric(n);
    fabric.kill(0);
    const auto statuses = run_ranks(n, [&](int r) {
      if (r == 0) return Status::ok();
      algorithms::CollectiveOptions options;
      options.deadline = Deadline::after(std::chrono::seconds(1));
      return algorithms::agreement_round(fabric.link(r), options);
    });
    for (int r = 1; r < n; ++r) {
      EXPECT_FALSE(statuses[r].is_ok()) << "n=" << n << " rank " << r << " committed";
    }
  }
}

}  // namespace
}  // namespace tributary::testing
