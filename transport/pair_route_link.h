// A Link over several links of one group that sends each pair's messages on the one that
// carries it: shared memory to the members on this host, TCP to the others, in a group that
// mixes transports without the failover protocol (docs/transports.md, "One transport per
// group, or per pair"). Nothing is added to the messages (no stamps, acknowledgements or
// copies), so each pair costs what its transport's own link costs; and nothing moves a pair
// either: a pair whose link fails fails as over a plain link (a peer failure, a new view),
// as a shared-memory group without failover does.
//
// wait() looks at every path without blocking each round (the other paths' sends and
// receives move while one operation is waited for), keeps looking while bytes move or for
// a short window after (yielding between looks where the group's ranks outnumber the
// cores), and then blocks up to `slice` in the waited operation's path. The threading of
// algorithms/link.h: one thread issues operations and waits; abort() from any thread.
#pragma once

#include <memory>
#include <vector>

#include "algorithms/pollable_link.h"
#include "core/clock.h"
#include "core/status.h"

namespace tributary::transport {

struct PairRouteParams {
  // path_peers[k][r]: path k carries the pair with rank r (as FailoverParams::path_peers;
  // empty, or path k's entry empty: every pair). Each pair goes on the first that carries it.
  std::vector<std::vector<bool>> path_peers;
  // Pacing of wait(), as the failover link's (FailoverParams): how long it keeps looking
  // after the last bytes moved, on a socket path and on one that polls memory; whether it
  // yields between looks (not where each of the group's ranks on this host has a core).
  Duration busy_poll = std::chrono::microseconds(50);
  Duration memory_busy_poll = std::chrono::microseconds(200);
  bool core_per_rank = false;
  Duration core_per_rank_busy_poll = std::chrono::microseconds(500);
  Duration slice = std::chrono::milliseconds(1);
};

// `paths[k]` is path k's link of the same group (same rank and size), at least two.
// kInvalidArgument when path_peers leaves a pair without a path or does not fit.
Result<std::unique_ptr<algorithms::Link>> make_pair_route_link(
    PairRouteParams params, std::vector<std::unique_ptr<algorithms::PollableLink>> paths);

}  // namespace tributary::transport
