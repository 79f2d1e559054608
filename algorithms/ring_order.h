// Ordering a ring by measured bandwidth.
//
// In a ring every member sends to the next one. Where several members share a host and
// the ranks interleave the hosts (A0 B0 A1 B1), the default ring crosses hosts at every
// hop and each host's uplink carries two flows; ordered A0 A1 B0 B1 only two hops cross.
// ring_order() takes the measured bandwidth of every ordered pair (measure_pair_links(),
// link_probe.h) and returns the order to run the ring in: rank i of the ordered ring is
// rank order[i], so hop i goes from order[i] to order[i + 1] (and the last back to
// order[0]) and costs bandwidth[order[i]][order[i + 1]].
//
// The rule: maximize the bottleneck (the slowest hop); among rings whose bottlenecks are
// within kRingOrderGain of each other (what noise alone can make on busy cores), fewest slow hops (slower
// than half the fastest pair), which keeps each fast group contiguous. A greedy tour (always on to the fastest unvisited rank) and the identity are
// improved by moving one rank or reversing a stretch while that helps. The identity is
// kept unless the result is clearly better: fewer slow hops (and a bottleneck no worse
// beyond noise), or a bottleneck at least kRingOrderGain times the identity's, so that measurement noise
// never reorders a homogeneous cluster. Pure and deterministic (ties go to the lowest
// rank): every rank that holds the same matrix computes the same order.
#pragma once

#include <vector>

namespace tributary::algorithms {

inline constexpr double kRingOrderGain = 2.0;
// Measuring every pair takes n - 1 rounds: beyond this many ranks the agent keeps the rank
// order rather than spend them at every view change.
inline constexpr int kRingOrderMaxRanks = 64;

// `bandwidth`: n x n, row-major, bandwidth[i * n + j] the bytes/s from rank i to rank j
// (the diagonal is ignored). Returns a permutation of 0..n-1 that starts with 0 (the
// identity for n <= 2, or when the matrix is not n x n).
std::vector<int> ring_order(const std::vector<double>& bandwidth, int n);

struct RingScore {
  double bottleneck = 0;  // the slowest hop's bandwidth
  int slow_hops = 0;      // hops slower than half the fastest pair
};
// The score of running the ring in `order` over `bandwidth` (as for ring_order()).
RingScore score_ring(const std::vector<double>& bandwidth, int n, const std::vector<int>& order);

bool is_identity(const std::vector<int>& order);

}  // namespace tributary::algorithms
