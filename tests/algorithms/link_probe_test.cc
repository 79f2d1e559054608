// Measuring an epoch's links (algorithms/link_probe.h) with ranks as threads over the
// in-memory fabric, and fitting the cost model to what was measured.
#include "algorithms/link_probe.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "algorithms/cost_model.h"
#include "algorithms/memory_link.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using algorithms::CostModel;
using algorithms::LinkEstimate;
using std::chrono::milliseconds;

algorithms::CollectiveOptions probe_options() {
  algorithms::CollectiveOptions o;
  o.seq = 77;
  o.deadline = Deadline::after(std::chrono::seconds(20));
  return o;
}

std::vector<Result<LinkEstimate>> measure(algorithms::MemoryFabric& fabric, int n) {
  std::vector<Result<LinkEstimate>> out(static_cast<std::size_t>(n), LinkEstimate{});
  const auto statuses = testing::run_ranks(n, [&](int r) -> Status {
    algorithms::LinkProbeParams params;
    params.bulk_bytes = 64 * 1024;
    out[static_cast<std::size_t>(r)] = algorithms::measure_ring_links(fabric.link(r),
                                                                      probe_options(), params);
    return out[static_cast<std::size_t>(r)].status();
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out;
}

// Every rank ends with the same estimate (the slowest link's), so every rank fits the
// same model and chooses the same algorithm.
TEST(LinkProbe, EveryRankAgreesOnTheSlowestLink) {
  for (int n : {2, 3, 5}) {
    algorithms::MemoryFabric fabric(n);
    const auto estimates = measure(fabric, n);
    for (const auto& e : estimates) {
      ASSERT_TRUE(e.is_ok());
      EXPECT_EQ(e->alpha, estimates[0]->alpha) << "n=" << n;
      EXPECT_EQ(e->beta, estimates[0]->beta) << "n=" << n;
      EXPECT_GE(e->alpha, 0);
      EXPECT_GE(e->beta, 0);
    }
  }
}

// A slow link (a rank whose messages take 20 ms to arrive) shows in alpha on every rank:
// a round trip through it takes at least the delay.
TEST(LinkProbe, ASlowRankSetsAlphaForEveryone) {
  constexpr int kRanks = 3;
  algorithms::MemoryFabric fabric(kRanks);
  fabric.set_delay(1, milliseconds(20));
  for (const auto& e : measure(fabric, kRanks)) {
    ASSERT_TRUE(e.is_ok());
    EXPECT_GE(e->alpha, 0.010) << "half a round trip through a 20 ms hop";
  }
}

TEST(LinkProbe, OneRankMeasuresNothing) {
  algorithms::MemoryFabric fabric(1);
  auto e = algorithms::measure_ring_links(fabric.link(0), probe_options());
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ(e->alpha, 0);
  EXPECT_EQ(e->beta, 0);
}

// A dead peer fails the measurement as it fails a collective.
TEST(LinkProbe, ADeadPeerFailsIt) {
  algorithms::MemoryFabric fabric(2);
  fabric.kill(1);
  auto e = algorithms::measure_ring_links(fabric.link(0), probe_options());
  EXPECT_EQ(e.status().code(), StatusCode::kPeerLost) << e.status().to_string();
}

TEST(CostModelFit, OnlyAMuchSlowerLinkReplacesTheDefaults) {
  const CostModel& d = CostModel::default_model();
  // Loopback under load: a few times slower than the defaults, kept.
  const CostModel loaded = d.fitted_to(d.alpha() * 9, d.beta() * 30);
  EXPECT_EQ(loaded.alpha(), d.alpha());
  EXPECT_EQ(loaded.beta(), d.beta());
  // 100 Mbit/s and a WAN round trip: both replaced; gamma, chunk and cores kept.
  const double mbit100 = 8.0 / 100e6;
  const CostModel slow = d.fitted_to(5e-3, mbit100);
  EXPECT_EQ(slow.alpha(), 5e-3);
  EXPECT_EQ(slow.beta(), mbit100);
  EXPECT_EQ(slow.gamma(), d.gamma());
  EXPECT_EQ(slow.chunk_bytes(), d.chunk_bytes());
  EXPECT_EQ(slow.cores(), d.cores());
  // A high latency on a fast link (busy cores, not a slow network): nothing adopted.
  const CostModel busy = d.fitted_to(5e-4, d.beta() * 2);
  EXPECT_EQ(busy.alpha(), d.alpha());
  EXPECT_EQ(busy.beta(), d.beta());
  // Garbage is never adopted.
  const CostModel bad = d.fitted_to(-1, std::numeric_limits<double>::infinity());
  EXPECT_EQ(bad.alpha(), d.alpha());
  EXPECT_EQ(bad.beta(), d.beta());
}

// What the fit is for: at 100 Mbit/s and 4 ranks a 16 MiB all-reduce ran 2.9x slower with
// the defaults' choice (double tree) than with the ring (bench/results/
// auto_algorithm_shaped_2026-11-23.md); the fitted model picks a bandwidth-optimal algorithm.
TEST(CostModelFit, AHundredMegabitLinkChoosesABandwidthOptimalAlgorithm) {
  const CostModel fitted = CostModel::default_model().fitted_to(2e-5, 8.0 / 100e6);
  const auto a = fitted.choose(4, std::size_t{16} << 20);
  EXPECT_TRUE(a == algorithms::AllReduceAlgorithm::kRing ||
              a == algorithms::AllReduceAlgorithm::kHalvingDoubling)
      << to_string(a);
}

}  // namespace
}  // namespace tributary
