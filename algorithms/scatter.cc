// Scatter: the root sends block r straight to rank r, all sends posted before any wait so
// a slow rank does not hold back the others' blocks.
#include <cstring>
#include <vector>

#include "algorithms/collective_util.h"
#include "algorithms/collectives.h"

namespace tributary::algorithms {

Status scatter(Link& link, const void* send, void* recv, std::size_t recv_count, DType dtype,
               int root, const CollectiveOptions& options) {
  const int n = link.size();
  TRIB_RETURN_IF_ERROR(validate_shape(recv_count, dtype, static_cast<std::size_t>(n), options));
  TRIB_RETURN_IF_ERROR(validate_root(link, root));
  const bool is_root = link.rank() == root;
  if (is_root) TRIB_RETURN_IF_ERROR(validate_buffer(send, recv_count, "send"));
  TRIB_RETURN_IF_ERROR(validate_buffer(recv, recv_count, "recv"));

  const std::size_t block = recv_count * dtype_size(dtype);
  auto* out = static_cast<std::byte*>(recv);
  const Tag tag{options.seq, 0,
                descriptor_check(Kind::kScatter, recv_count, dtype, ReduceOp::kSum, root)};
  Waiter waiter(link, options.deadline);

  if (!is_root) return waiter.wait(link.recv(root, tag, std::span<std::byte>(out, block)));
  const auto* in = static_cast<const std::byte*>(send);
  std::vector<Link::Handle> sends;
  sends.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (r == root) continue;
    sends.push_back(link.send(
        r, tag, std::span<const std::byte>(in + static_cast<std::size_t>(r) * block, block)));
  }
  const std::byte* own = in + static_cast<std::size_t>(root) * block;
  if (block != 0 && own != out) std::memcpy(out, own, block);
  for (Link::Handle h : sends) TRIB_RETURN_IF_ERROR(waiter.wait(h));
  return Status::ok();
}

}  // namespace tributary::algorithms
