// Dissemination barrier (Hensgen, Finkel, Manber): in round k rank r signals r + 2^k and
// waits for r - 2^k. After ceil(log2 n) rounds every rank has heard, directly or through
// others, from every rank, and a rank only signals round k after finishing round k-1, so
// no rank leaves before all have entered. Messages are empty; the tag carries everything.
#include "algorithms/collective_util.h"
#include "algorithms/collectives.h"

namespace tributary::algorithms {

Status barrier(Link& link, const CollectiveOptions& options) {
  const int n = link.size();
  const int rank = link.rank();
  const std::uint32_t check = descriptor_check(Kind::kBarrier, 0, DType::kUInt8, ReduceOp::kSum, 0);
  Waiter waiter(link, options.deadline);
  std::uint32_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    const Tag tag{options.seq, round, check};
    const Link::Handle sent = link.send((rank + distance) % n, tag, {});
    const Link::Handle heard = link.recv((rank - distance + n) % n, tag, {});
    TRIB_RETURN_IF_ERROR(waiter.wait(heard));
    TRIB_RETURN_IF_ERROR(waiter.wait(sent));
  }
  return Status::ok();
}

}  // namespace tributary::algorithms
