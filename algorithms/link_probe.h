// Measuring the links an epoch runs on, for the cost model (cost_model.h): every rank times
// its link to the next rank of the ring (a few small ping-pongs, then one bulk transfer
// answered by a small acknowledgement), and the ranks agree on the slowest link with an
// all-reduce (max), so every rank holds the same estimate and chooses the same algorithm.
//
// alpha is half the fastest small round trip (the noise of a loaded machine only ever
// adds time); beta is what the bulk transfer took beyond its two latencies, per byte.
// Every rank runs it at the same point (right after an epoch's links come up), under the
// caller's seq (its messages) and seq + 1 (the agreement), and the caller's deadline; a failure is the link's (kPeerLost, kTimedOut, ...), like
// any collective's.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/collectives.h"
#include "core/status.h"

namespace tributary::algorithms {

struct LinkEstimate {
  double alpha = 0;  // seconds per message (one way)
  double beta = 0;   // seconds per byte
};

struct LinkProbeParams {
  int pings = 4;
  int bulks = 2;  // the fastest counts, as for the pings
  std::size_t bulk_bytes = 1 << 20;
};

// The slowest ring link's estimate, equal on every rank; {0, 0} when there is one rank.
Result<LinkEstimate> measure_ring_links(Link& link, const CollectiveOptions& options,
                                        const LinkProbeParams& params = {});

// Measuring every pair, for ordering the ring (ring_order.h): in n - 1 rounds (n when n
// is odd; a round-robin schedule, each rank paired with one partner per round, or idle)
// every pair exchanges a few small ping-pongs and then bulk transfers each way, each
// answered by a small acknowledgement. Rank i times its own bulk to j: row i of the
// matrix is what i measured, the bandwidth of a bulk transfer (bytes over the fastest
// transfer's time beyond one round trip). The ranks then all-gather their rows, so every
// rank holds the same matrix. Under the caller's seq (its messages) and seq + 1 (the
// all-gather) and deadline; a failure is the link's, like any collective's.
struct PairProbeParams {
  int pings = 4;  // taken in turns: each rank of a pair times half
  int bulks = 2;  // each way; the fastest counts (load only ever adds time)
  std::size_t bulk_bytes = 256 * 1024;
};

// n x n, row-major: [i * n + j] the bytes/s from rank i to rank j; the diagonal 0.
// Empty for one rank.
Result<std::vector<double>> measure_pair_links(Link& link, const CollectiveOptions& options,
                                               const PairProbeParams& params = {});

}  // namespace tributary::algorithms
