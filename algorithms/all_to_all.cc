// All-to-all by pairwise exchange: in step s rank r sends block (r+s)%n to that rank and
// receives block (r-s)%n from that rank, so in every step each rank has exactly one
// sender and one receiver. All receives are posted before the first send, so blocks land
// in place whatever order peers progress in, and every rank hears from every other rank
// even if one exchange fails: a rank that disagrees on count is reported by all of them.
#include <cstring>
#include <vector>

#include "algorithms/collective_util.h"
#include "algorithms/collectives.h"

namespace tributary::algorithms {

Status all_to_all(Link& link, const void* send, void* recv, std::size_t count_per_peer, DType dtype,
                  const CollectiveOptions& options) {
  const int n = link.size();
  const int rank = link.rank();
  TRIB_RETURN_IF_ERROR(validate_shape(count_per_peer, dtype, static_cast<std::size_t>(n), options));
  TRIB_RETURN_IF_ERROR(validate_buffer(send, count_per_peer, "send"));
  TRIB_RETURN_IF_ERROR(validate_buffer(recv, count_per_peer, "recv"));
  if (count_per_peer != 0 && send == recv) {
    return error(StatusCode::kInvalidArgument, "all_to_all is not in-place");
  }

  const std::size_t block = count_per_peer * dtype_size(dtype);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  auto at = [block](auto* base, int r) { return base + static_cast<std::size_t>(r) * block; };
  const Tag tag{options.seq, 0,
                descriptor_check(Kind::kAllToAll, count_per_peer, dtype, ReduceOp::kSum, 0)};
  Waiter waiter(link, options.deadline);

  std::vector<Link::Handle> recvs;
  std::vector<Link::Handle> sends;
  recvs.reserve(static_cast<std::size_t>(n));
  sends.reserve(static_cast<std::size_t>(n));
  for (int s = 1; s < n; ++s) {
    const int from = (rank - s + n) % n;
    recvs.push_back(link.recv(from, tag, std::span<std::byte>(at(out, from), block)));
  }
  for (int s = 1; s < n; ++s) {
    const int to = (rank + s) % n;
    sends.push_back(link.send(to, tag, std::span<const std::byte>(at(in, to), block)));
  }
  if (block != 0) std::memcpy(at(out, rank), at(in, rank), block);
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    TRIB_RETURN_IF_ERROR(waiter.wait(recvs[i]));
    TRIB_RETURN_IF_ERROR(waiter.wait(sends[i]));
  }
  return Status::ok();
}

}  // namespace tributary::algorithms
