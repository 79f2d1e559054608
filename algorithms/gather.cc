// Gather: every rank sends its block straight to the root, which posts all receives at
// once so blocks land in place in whatever order they arrive. One message per rank: the
// root's link is the bottleneck either way, and a direct message has no relay to lose.
#include <cstring>
#include <vector>

#include "algorithms/collective_util.h"
#include "algorithms/collectives.h"

namespace tributary::algorithms {

Status gather(Link& link, const void* send, void* recv, std::size_t send_count, DType dtype,
              int root, const CollectiveOptions& options) {
  const int n = link.size();
  TRIB_RETURN_IF_ERROR(validate_shape(send_count, dtype, static_cast<std::size_t>(n), options));
  TRIB_RETURN_IF_ERROR(validate_root(link, root));
  const bool is_root = link.rank() == root;
  TRIB_RETURN_IF_ERROR(validate_buffer(send, send_count, "send"));
  if (is_root) TRIB_RETURN_IF_ERROR(validate_buffer(recv, send_count, "recv"));

  const std::size_t block = send_count * dtype_size(dtype);
  const auto* in = static_cast<const std::byte*>(send);
  const Tag tag{options.seq, 0,
                descriptor_check(Kind::kGather, send_count, dtype, ReduceOp::kSum, root)};
  Waiter waiter(link, options.deadline);

  if (!is_root) {
    return waiter.wait(link.send(root, tag, std::span<const std::byte>(in, block)));
  }
  auto* out = static_cast<std::byte*>(recv);
  std::vector<Link::Handle> recvs;
  recvs.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (r == root) continue;
    recvs.push_back(
        link.recv(r, tag, std::span<std::byte>(out + static_cast<std::size_t>(r) * block, block)));
  }
  std::byte* own = out + static_cast<std::size_t>(root) * block;
  if (block != 0 && own != in) std::memcpy(own, in, block);
  for (Link::Handle h : recvs) TRIB_RETURN_IF_ERROR(waiter.wait(h));
  return Status::ok();
}

}  // namespace tributary::algorithms
