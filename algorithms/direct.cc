// Direct all-reduce for tiny messages: every rank sends its whole vector to every other
// rank and computes x[0] op x[1] op ... op x[n-1] itself, in rank order. One round of
// latency; n-1 times the bytes of a ring, so only the cost model's smallest sizes use it.
// Every rank evaluates the same expression on the same bits, so results agree bitwise.
#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/in_flight.h"
#include "core/reduce.h"

namespace tributary::algorithms {

Status direct_all_reduce(const ReduceJob& job) {
  Link& link = job.link;
  const int n = link.size();
  const int rank = link.rank();
  const std::size_t bytes = job.count * job.element_size();
  const auto un = static_cast<std::size_t>(n);
  const Tag tag = job.tags.at(0);

  // In place, recv is overwritten while the own contribution is still an operand (and
  // still being sent), so it is kept aside; out of place it is read from `send`.
  const bool in_place = job.send == job.recv;
  // Left uninitialised: every byte is received or copied before it is read.
  const auto scratch =
      std::make_unique_for_overwrite<std::byte[]>((in_place ? un : un - 1) * bytes);
  std::vector<std::byte*> landing(un, nullptr);  // where rank j's vector is received
  std::size_t used = 0;
  for (std::size_t j = 0; j < un; ++j) {
    if (j != static_cast<std::size_t>(rank) || in_place)
      landing[j] = scratch.get() + used++ * bytes;
  }
  const std::byte* own = job.send;
  if (in_place) {
    std::memcpy(landing[static_cast<std::size_t>(rank)], job.send, bytes);
    own = landing[static_cast<std::size_t>(rank)];
  }
  auto operand = [&](std::size_t j) -> const std::byte* {
    return j == static_cast<std::size_t>(rank) ? own : landing[j];
  };

  std::vector<Link::Handle> recvs(un);
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    const auto uj = static_cast<std::size_t>(j);
    recvs[uj] = link.recv(j, tag, std::span<std::byte>(landing[uj], bytes));
  }
  SendWindow sends(link, job.deadline, un);
  for (int k = 1; k < n; ++k) {
    // Staggered so that rank 0 is not everybody's first destination.
    const int peer = (rank + k) % n;
    TRIB_RETURN_IF_ERROR(sends.add(link.send(peer, tag, std::span<const std::byte>(own, bytes))));
  }
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, recvs[static_cast<std::size_t>(j)], job.deadline));
  }
  reduce_to(job.recv, operand(0), operand(1), job.count, job.dtype, job.op);
  for (std::size_t j = 2; j < un; ++j)
    reduce_into(job.recv, operand(j), job.count, job.dtype, job.op);
  if (job.op == ReduceOp::kAvg) scale_by_count(job.recv, job.count, job.dtype, n);
  return sends.drain();
}

}  // namespace tributary::algorithms
