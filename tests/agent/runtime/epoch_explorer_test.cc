// The schedule explorer (schedule_explorer.h) over a fixed seed set: N = 2..4 epoch
// machines, the real Membership, a simulated network; kills, freezes, link failures,
// coordinator restarts, joins and drains at random moments. Every schedule must keep the
// invariants. The epoch_explorer command runs millions of seeds offline; a failing seed is replayed
// with `epoch_explorer --seed S --trace`.
#include <gtest/gtest.h>

#include <string>

#include "tests/agent/runtime/schedule_explorer.h"

namespace tributary::agent::runtime {
namespace {

ExplorerTotals expect_clean(std::uint64_t first, std::uint64_t count,
                            const ExplorerOptions& options) {
  ExplorerTotals t;
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    const ScheduleResult r = explore(seed, options);
    t.add(r);
    if (!r.ok && t.violated <= 3) {
      std::string all;
      for (const auto& v : r.violations) all += "  " + v + "\n";
      ADD_FAILURE() << "seed " << seed << " (replay: epoch_explorer --seed " << seed
                    << " --trace):\n"
                    << all;
    }
  }
  EXPECT_EQ(t.violated, 0u);
  std::printf("%llu schedules: %s\n", static_cast<unsigned long long>(count), t.summary().c_str());
  return t;
}

TEST(EpochExplorer, WithoutFaultsEveryMemberReturnsEveryCall) {
  ExplorerOptions o;
  o.max_faults = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const ScheduleResult r = explore(seed, o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.violations.front();
    EXPECT_EQ(r.returns, r.members * o.calls) << "seed " << seed;
    EXPECT_EQ(r.repaired, 0) << "seed " << seed;
    EXPECT_EQ(r.views, 1) << "seed " << seed;
  }
}

TEST(EpochExplorer, EveryFaultTogetherKeepsTheInvariants) {
  // Kills, freezes, link failures, coordinator restarts, joins and drains, 0-3 of them per
  // schedule at random moments. The totals say the schedules exercise what they claim to.
  const ExplorerTotals t = expect_clean(1000, 60000, ExplorerOptions{});
  EXPECT_GT(t.faults(), 60000u);
  EXPECT_GT(t.joins, 5000u);
  EXPECT_GT(t.drains, 5000u);
  EXPECT_GT(t.restarts, 5000u);
  EXPECT_GT(t.boundaries, 5000u);
  EXPECT_GT(t.speculative, 100000u);
  EXPECT_GT(t.reruns, 5000u);
  EXPECT_GT(t.repaired, 1000u);
}

TEST(EpochExplorer, KillsAndLinkFailuresAloneKeepTheInvariants) {
  // Without freezes or restarts the member that returned early stays reachable: the
  // repair step carries most of the weight.
  ExplorerOptions o;
  o.freezes = false;
  o.coordinator_restarts = false;
  o.joins = false;
  o.drains = false;
  const ExplorerTotals t = expect_clean(500000, 20000, o);
  EXPECT_GT(t.repaired, 200u);
  EXPECT_GT(t.reruns, 2000u);
}

}  // namespace
}  // namespace tributary::agent::runtime
