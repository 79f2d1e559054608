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

std::vector<Result<std::vector<double>>> measure_pairs(algorithms::MemoryFabric& fabric, int n,
                                                      Deadline deadline) {
  std::vector<Result<std::vector<double>>> out(static_cast<std::size_t>(n),
                                               std::vector<double>{});
  testing::run_ranks(n, [&](int r) -> Status {
    algorithms::PairProbeParams params;
    params.bulk_bytes = 32 * 1024;
    algorithms::CollectiveOptions o = probe_options();
    o.deadline = deadline;
    auto& mine = out[static_cast<std::size_t>(r)];
    mine = algorithms::measure_pair_links(fabric.link(r), o, params);
    return mine.status();
  });
  return out;
}

// Every rank ends with the same matrix, every pair measured both ways, for even and odd
// sizes (an odd size sits one rank out of each round).
TEST(PairProbe, EveryRankHoldsTheSameMatrix) {
  for (int n : {2, 3, 4, 5, 6}) {
    algorithms::MemoryFabric fabric(n);
    const auto matrices = measure_pairs(fabric, n, Deadline::after(std::chrono::seconds(20)));
    ASSERT_TRUE(matrices[0].is_ok()) << matrices[0].status().to_string();
    ASSERT_EQ(matrices[0]->size(), static_cast<std::size_t>(n * n));
    for (const auto& m : matrices) {
      ASSERT_TRUE(m.is_ok()) << m.status().to_string();
      EXPECT_EQ(m.value(), matrices[0].value()) << "n=" << n;
    }
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        const double bw = matrices[0].value()[static_cast<std::size_t>(i * n + j)];
        if (i == j) {
          EXPECT_EQ(bw, 0);
        } else {
          EXPECT_GT(bw, 0) << i << " -> " << j << ", n=" << n;
        }
      }
    }
  }
}

// A rank whose messages take 20 ms: every pair with it measures slower than the others.
TEST(PairProbe, ASlowRanksPairsMeasureSlower) {
  constexpr int kRanks = 4;
  algorithms::MemoryFabric fabric(kRanks);
  fabric.set_delay(2, milliseconds(20));
  const auto matrices = measure_pairs(fabric, kRanks, Deadline::after(std::chrono::seconds(20)));
  ASSERT_TRUE(matrices[0].is_ok()) << matrices[0].status().to_string();
  const auto& m = matrices[0].value();
  auto bw = [&](int i, int j) { return m[static_cast<std::size_t>(i * kRanks + j)]; };
  EXPECT_LT(bw(2, 0), bw(0, 1));
  EXPECT_LT(bw(0, 2), bw(0, 1));
  EXPECT_LT(bw(1, 2), bw(1, 3));
}

// A dead rank fails the measurement on every other rank (kPeerLost), and a frozen one
// fails it at the deadline: nobody hangs.
TEST(PairProbe, ADeadOrFrozenRankFailsItWithoutHanging) {
  for (bool freeze : {false, true}) {
    constexpr int kRanks = 4;
    algorithms::MemoryFabric fabric(kRanks);
    if (freeze) {
      fabric.freeze(3);
    } else {
      fabric.kill(3);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto matrices =
        measure_pairs(fabric, kRanks, Deadline::after(std::chrono::milliseconds(500)));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    for (int r = 0; r < 3; ++r) {
      EXPECT_FALSE(matrices[static_cast<std::size_t>(r)].is_ok()) << "rank " << r;
    }
  }
}

TEST(PairProbe, OneRankMeasuresNothing) {
  algorithms::MemoryFabric fabric(1);
  auto m = algorithms::measure_pair_links(fabric.link(0), probe_options());
  ASSERT_TRUE(m.is_ok());
  EXPECT_TRUE(m->empty());
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
