// Dissemination barrier (Hensgen, Finkel, Manber): in round k rank r signals r + 2^k and
// waits for r - 2^k. After ceil(log2 n) rounds every rank has heard, directly or through
// others, from every rank, and a rank only signals round k after finishing round k-1, so
// no rank leaves before all have entered. Messages are empty; the tag carries everything.
#include "algorithms/collectives.h"
#include "algorithms/in_flight.h"
#include "algorithms/tags.h"

namespace tributary::algorithms {

Status barrier(Link& link, const CollectiveOptions& options) {
  const int n = link.size();
  const int rank = link.rank();
  const TagMaker tags(options.seq, Descriptor{.kind = Collective::kBarrier});
  std::uint32_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    const Tag tag = tags.at(round);
    const Link::Handle sent = link.send((rank + distance) % n, tag, {});
    const Link::Handle heard = link.recv((rank - distance + n) % n, tag, {});
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, heard, options.deadline));
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, sent, options.deadline));
  }
  return Status::ok();
}

}  // namespace tributary::algorithms
