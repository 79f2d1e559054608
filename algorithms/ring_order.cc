#include "algorithms/ring_order.h"

#include <algorithm>
#include <cstddef>
#include <numeric>

namespace tributary::algorithms {
namespace {

// The improvement pass costs O(n^3) per sweep; beyond this size only the greedy tour runs.
constexpr int kImproveLimit = 128;
constexpr int kMaxSweeps = 16;

double at(const std::vector<double>& bw, int n, int i, int j) {
  return bw[static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)];
}

double fastest_pair(const std::vector<double>& bw, int n) {
  double best = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i != j) best = std::max(best, at(bw, n, i, j));
    }
  }
  return best;
}

RingScore score(const std::vector<double>& bw, int n, const std::vector<int>& order,
                double slow_below) {
  RingScore s;
  if (n <= 1) return s;
  s.bottleneck = -1;
  for (int k = 0; k < n; ++k) {
    const double hop = at(bw, n, order[static_cast<std::size_t>(k)],
                          order[static_cast<std::size_t>((k + 1) % n)]);
    if (s.bottleneck < 0 || hop < s.bottleneck) s.bottleneck = hop;
    if (hop < slow_below) ++s.slow_hops;
  }
  return s;
}

// The clearly larger bottleneck (by kRingOrderGain); among bottlenecks closer than that,
// which measurement noise alone can make, the fewer slow hops; then the larger bottleneck.
// (Not transitive at the band's edges: the search below is bounded by sweeps.)
bool better(const RingScore& a, const RingScore& b) {
  if (a.bottleneck > kRingOrderGain * b.bottleneck) return true;
  if (b.bottleneck > kRingOrderGain * a.bottleneck) return false;
  if (a.slow_hops != b.slow_hops) return a.slow_hops < b.slow_hops;
  return a.bottleneck > b.bottleneck;
}

// From rank 0, always on to the fastest unvisited rank (ties: the lowest).
std::vector<int> greedy(const std::vector<double>& bw, int n) {
  std::vector<int> order{0};
  std::vector<bool> used(static_cast<std::size_t>(n), false);
  used[0] = true;
  for (int k = 1; k < n; ++k) {
    const int from = order.back();
    int pick = -1;
    for (int j = 0; j < n; ++j) {
      if (used[static_cast<std::size_t>(j)]) continue;
      if (pick < 0 || at(bw, n, from, j) > at(bw, n, from, pick)) pick = j;
    }
    used[static_cast<std::size_t>(pick)] = true;
    order.push_back(pick);
  }
  return order;
}

// First-improvement local search over two moves, position 0 (rank 0) fixed: move the rank
// at position i to position j; reverse positions i..j. Deterministic scan order.
std::vector<int> improve(const std::vector<double>& bw, int n, std::vector<int> order,
                         double slow_below) {
  if (n > kImproveLimit) return order;
  RingScore current = score(bw, n, order, slow_below);
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool improved = false;
    for (int i = 1; i < n && !improved; ++i) {
      for (int j = 1; j < n && !improved; ++j) {
        if (i == j) continue;
        std::vector<int> moved = order;
        const int r = moved[static_cast<std::size_t>(i)];
        moved.erase(moved.begin() + i);
        moved.insert(moved.begin() + j, r);
        if (RingScore s = score(bw, n, moved, slow_below); better(s, current)) {
          order = std::move(moved);
          current = s;
          improved = true;
          break;
        }
        if (j > i + 1) {
          std::vector<int> reversed = order;
          std::reverse(reversed.begin() + i, reversed.begin() + j + 1);
          if (RingScore s = score(bw, n, reversed, slow_below); better(s, current)) {
            order = std::move(reversed);
            current = s;
            improved = true;
          }
        }
      }
    }
    if (!improved) break;
  }
  return order;
}

}  // namespace

RingScore score_ring(const std::vector<double>& bandwidth, int n, const std::vector<int>& order) {
  return score(bandwidth, n, order, fastest_pair(bandwidth, n) / 2);
}

bool is_identity(const std::vector<int>& order) {
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int>(i)) return false;
  }
  return true;
}

std::vector<int> ring_order(const std::vector<double>& bandwidth, int n) {
  std::vector<int> identity(static_cast<std::size_t>(std::max(n, 0)));
  std::iota(identity.begin(), identity.end(), 0);
  if (n <= 2 || bandwidth.size() != static_cast<std::size_t>(n) * static_cast<std::size_t>(n)) {
    return identity;
  }
  const double slow_below = fastest_pair(bandwidth, n) / 2;
  std::vector<int> best = improve(bandwidth, n, greedy(bandwidth, n), slow_below);
  RingScore best_score = score(bandwidth, n, best, slow_below);
  std::vector<int> from_identity = improve(bandwidth, n, identity, slow_below);
  if (RingScore s = score(bandwidth, n, from_identity, slow_below); better(s, best_score)) {
    best = std::move(from_identity);
    best_score = s;
  }
  const RingScore base = score(bandwidth, n, identity, slow_below);
  const bool fewer_slow = best_score.slow_hops < base.slow_hops &&
                          kRingOrderGain * best_score.bottleneck >= base.bottleneck;
  const bool wider = best_score.bottleneck >= kRingOrderGain * base.bottleneck;
  return fewer_slow || wider ? best : identity;
}

}  // namespace tributary::algorithms
