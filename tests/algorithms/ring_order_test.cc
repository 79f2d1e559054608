// Ordering a ring by measured bandwidth (algorithms/ring_order.h), and running a ring
// all-reduce over the ordered ring (a SubLink over a permutation of the ranks).
#include "algorithms/ring_order.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "algorithms/sub_link.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using algorithms::ring_order;
using algorithms::score_ring;

constexpr double kFast = 5e9;   // same host: shared memory / loopback
constexpr double kSlow = 1e8;   // across hosts

// n ranks on the hosts host[r]; pairs on one host are fast, others slow; `noise` scales
// every entry by a deterministic factor in [1 - noise, 1 + noise].
std::vector<double> matrix(const std::vector<int>& host, double noise = 0, unsigned seed = 1) {
  const int n = static_cast<int>(host.size());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(1 - noise, 1 + noise);
  std::vector<double> bw(static_cast<std::size_t>(n * n), 0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      bw[static_cast<std::size_t>(i * n + j)] = (host[i] == host[j] ? kFast : kSlow) * u(rng);
    }
  }
  return bw;
}

std::vector<int> identity(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

bool is_permutation_from_zero(const std::vector<int>& order, int n) {
  if (static_cast<int>(order.size()) != n || order.empty() || order[0] != 0) return false;
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  for (int r : order) {
    if (r < 0 || r >= n || seen[static_cast<std::size_t>(r)]) return false;
    seen[static_cast<std::size_t>(r)] = true;
  }
  return true;
}

// How many hops of `order` go from one host to another.
int crossings(const std::vector<int>& order, const std::vector<int>& host) {
  const std::size_t n = order.size();
  int c = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (host[static_cast<std::size_t>(order[k])] != host[static_cast<std::size_t>(order[(k + 1) % n])]) ++c;
  }
  return c;
}

TEST(RingOrder, InterleavedTwoHostsAreGrouped) {
  for (int n : {4, 6, 8}) {
    std::vector<int> host;
    for (int r = 0; r < n; ++r) host.push_back(r % 2);  // A0 B0 A1 B1 ...
    for (double noise : {0.0, 0.1}) {
      const auto bw = matrix(host, noise, static_cast<unsigned>(n));
      const auto order = ring_order(bw, n);
      ASSERT_TRUE(is_permutation_from_zero(order, n)) << "n=" << n;
      EXPECT_EQ(crossings(order, host), 2) << "n=" << n << " noise=" << noise;
      EXPECT_EQ(score_ring(bw, n, order).slow_hops, 2);
      EXPECT_EQ(score_ring(bw, n, identity(n)).slow_hops, n);
    }
  }
  // The exact order for four ranks without noise: ties go to the lowest rank.
  const auto four = ring_order(matrix({0, 1, 0, 1}), 4);
  EXPECT_EQ(four, (std::vector<int>{0, 2, 1, 3}));
}

TEST(RingOrder, ThreeGroupsAreEachContiguous) {
  const std::vector<int> host = {0, 1, 2, 0, 1, 2, 0, 1};  // sizes 3, 3, 2
  for (double noise : {0.0, 0.1}) {
    const auto bw = matrix(host, noise, 7);
    const auto order = ring_order(bw, 8);
    ASSERT_TRUE(is_permutation_from_zero(order, 8));
    EXPECT_EQ(crossings(order, host), 3) << "noise=" << noise;
  }
}

TEST(RingOrder, GroupedRanksKeepTheIdentity) {
  // Already contiguous (A A B B): nothing to gain.
  EXPECT_EQ(ring_order(matrix({0, 0, 1, 1}), 4), identity(4));
  EXPECT_EQ(ring_order(matrix({0, 0, 0, 1, 1, 1}, 0.1, 3), 6), identity(6));
}

TEST(RingOrder, HomogeneousAndNoisyClustersKeepTheIdentity) {
  for (int n : {2, 3, 4, 5, 8, 16}) {
    const std::vector<int> one_host(static_cast<std::size_t>(n), 0);
    EXPECT_EQ(ring_order(matrix(one_host), n), identity(n)) << "n=" << n;
    std::vector<int> all_hosts;
    for (int r = 0; r < n; ++r) all_hosts.push_back(r);
    for (unsigned seed = 1; seed <= 20; ++seed) {
      EXPECT_EQ(ring_order(matrix(one_host, 0.1, seed), n), identity(n)) << "n=" << n;
      EXPECT_EQ(ring_order(matrix(all_hosts, 0.1, seed), n), identity(n)) << "n=" << n;
    }
  }
}

TEST(RingOrder, AsymmetricLinksChooseTheFastDirection) {
  // 0 -> 1 is slow, 1 -> 0 fast: the ring runs the other way round (0 -> 2 -> 1 -> 0).
  std::vector<double> bw = matrix({0, 0, 0});
  bw[0 * 3 + 1] = kSlow;
  EXPECT_EQ(ring_order(bw, 3), (std::vector<int>{0, 2, 1}));
  // Symmetric again: the identity.
  bw[0 * 3 + 1] = kFast;
  EXPECT_EQ(ring_order(bw, 3), identity(3));
}

TEST(RingOrder, MalformedInputGivesTheIdentity) {
  EXPECT_EQ(ring_order({}, 0), identity(0));
  EXPECT_EQ(ring_order({1, 2, 3}, 4), identity(4));
  EXPECT_EQ(ring_order({0}, 1), identity(1));
}

TEST(RingOrder, IsDeterministic) {
  const std::vector<int> host = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  const auto bw = matrix(host, 0.2, 11);
  const auto a = ring_order(bw, 12);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ring_order(bw, 12), a);
  EXPECT_EQ(crossings(a, host), 4);
}

// A ring all-reduce over a permuted SubLink leaves bit-identical results on every rank
// (its all-gather hands every rank the same reduced chunks), for sums that round.
TEST(RingOrder, ReorderedRingAllReduceAgreesBitForBit) {
  constexpr int kRanks = 6;
  constexpr std::size_t kCount = 10007;
  const std::vector<int> order = {0, 2, 4, 1, 3, 5};
  algorithms::MemoryFabric fabric(kRanks);
  std::vector<std::vector<float>> in(kRanks), out(kRanks, std::vector<float>(kCount));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1e3f, 1e3f);
  for (auto& v : in) {
    for (std::size_t i = 0; i < kCount; ++i) v.push_back(u(rng) * (i % 7 == 0 ? 1e-6f : 1.0f));
  }
  const auto statuses = testing::run_ranks(kRanks, [&](int r) -> Status {
    algorithms::SubLink ordered(fabric.link(r), order);
    algorithms::CollectiveOptions o;
    o.seq = 3;
    o.deadline = Deadline::after(std::chrono::seconds(20));
    o.algorithm = algorithms::AllReduceAlgorithm::kRing;
    o.chunk_bytes = 4096;
    return algorithms::all_reduce(ordered, in[static_cast<std::size_t>(r)].data(),
                                  out[static_cast<std::size_t>(r)].data(), kCount,
                                  DType::kFloat32, ReduceOp::kSum, o);
  });
  for (const Status& st : statuses) ASSERT_TRUE(st.is_ok()) << st.to_string();
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_EQ(std::memcmp(out[0].data(), out[static_cast<std::size_t>(r)].data(),
                          kCount * sizeof(float)),
              0)
        << "rank " << r;
  }
  for (std::size_t i = 0; i < kCount; i += 997) {
    double sum = 0;
    for (const auto& v : in) sum += v[i];
    EXPECT_NEAR(out[0][i], sum, 1e-2) << i;
  }
}

}  // namespace
}  // namespace tributary
