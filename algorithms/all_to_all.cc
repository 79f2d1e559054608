// All-to-all by pairwise exchange (all_to_all_v: the same with a count per peer): in step s rank r sends block (r+s)%n to that rank and
// receives block (r-s)%n from that rank, so in every step each rank has exactly one
// sender and one receiver. All receives are posted before the first send, so blocks land
// in place whatever order peers progress in, and every rank hears from every other rank
// even if one exchange fails: a rank that disagrees on count is reported by all of them.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/in_flight.h"
#include "algorithms/tags.h"
#include "algorithms/validate.h"

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
  const Tag tag =
      TagMaker(options.seq,
               Descriptor{.kind = Collective::kAllToAll, .count = count_per_peer, .dtype = dtype})
          .at(0);

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
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, recvs[i], options.deadline));
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, sends[i], options.deadline));
  }
  return Status::ok();
}

Status all_to_all_v(Link& link, const void* send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_offsets, void* recv,
                    std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> recv_offsets, DType dtype,
                    const CollectiveOptions& options) {
  const int n = link.size();
  const int rank = link.rank();
  const auto un = static_cast<std::size_t>(n);
  if (send_counts.size() != un || send_offsets.size() != un || recv_counts.size() != un ||
      recv_offsets.size() != un) {
    return error(StatusCode::kInvalidArgument,
                 "all_to_all_v needs a count and an offset per rank, for " + std::to_string(n) +
                     " ranks");
  }
  TRIB_RETURN_IF_ERROR(validate_shape(1, dtype, 1, options));
  const std::size_t element = dtype_size(dtype);
  std::size_t send_end = 0;
  std::size_t recv_end = 0;
  for (std::size_t r = 0; r < un; ++r) {
    send_end = std::max(send_end, (send_offsets[r] + send_counts[r]) * element);
    recv_end = std::max(recv_end, (recv_offsets[r] + recv_counts[r]) * element);
  }
  TRIB_RETURN_IF_ERROR(validate_buffer(send, send_end, "send"));
  TRIB_RETURN_IF_ERROR(validate_buffer(recv, recv_end, "recv"));
  if (overlaps(send, send_end, recv, recv_end)) {
    return error(StatusCode::kInvalidArgument, "all_to_all_v is not in-place");
  }
  const auto me = static_cast<std::size_t>(rank);
  if (send_counts[me] != recv_counts[me]) {
    return error(StatusCode::kInvalidArgument,
                 "all_to_all_v: this rank sends itself " + std::to_string(send_counts[me]) +
                     " elements but expects " + std::to_string(recv_counts[me]));
  }
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  // The message lengths say the rest: a peer that expects another count fails its receive.
  const Tag tag =
      TagMaker(options.seq, Descriptor{.kind = Collective::kAllToAllV, .dtype = dtype}).at(0);
  std::vector<Link::Handle> recvs;
  std::vector<Link::Handle> sends;
  for (int s = 1; s < n; ++s) {
    const auto from = static_cast<std::size_t>((rank - s + n) % n);
    recvs.push_back(link.recv(static_cast<int>(from), tag,
                              std::span<std::byte>(out + recv_offsets[from] * element,
                                                   recv_counts[from] * element)));
  }
  for (int s = 1; s < n; ++s) {
    const auto to = static_cast<std::size_t>((rank + s) % n);
    sends.push_back(link.send(static_cast<int>(to), tag,
                              std::span<const std::byte>(in + send_offsets[to] * element,
                                                         send_counts[to] * element)));
  }
  if (send_counts[me] != 0) {
    std::memcpy(out + recv_offsets[me] * element, in + send_offsets[me] * element,
                send_counts[me] * element);
  }
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, recvs[i], options.deadline));
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, sends[i], options.deadline));
  }
  return Status::ok();
}

}  // namespace tributary::algorithms
