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

}  // namespace tributary::algorithms
