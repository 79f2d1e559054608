// Pipelined broadcast along the pipeline tree of collective_util.h. Every non-root rank
// keeps kPipelineDepth receives posted ahead, directly into the caller's recv buffer, and
// forwards chunk i to its children as soon as it lands, while chunks i+1.. are arriving.
// The root sends straight from `send`, so an out-of-place root copy overlaps the sends.
#include <cstring>
#include <deque>

#include "algorithms/collective_util.h"
#include "algorithms/collectives.h"

namespace tributary::algorithms {

Status broadcast(Link& link, const void* send, void* recv, std::size_t count, DType dtype, int root,
                 const CollectiveOptions& options) {
  TRIB_RETURN_IF_ERROR(validate_shape(count, dtype, 1, options));
  TRIB_RETURN_IF_ERROR(validate_root(link, root));
  const bool is_root = link.rank() == root;
  if (is_root) TRIB_RETURN_IF_ERROR(validate_buffer(send, count, "send"));
  TRIB_RETURN_IF_ERROR(validate_buffer(recv, count, "recv"));

  const std::size_t esize = dtype_size(dtype);
  auto* out = static_cast<std::byte*>(recv);
  const auto* src = is_root ? static_cast<const std::byte*>(send) : out;
  if (link.size() == 1) {
    if (count != 0 && src != out) std::memcpy(out, src, count * esize);
    return Status::ok();
  }

  const Chunking chunks(count, esize, options.chunk_bytes);
  const std::size_t num = chunks.num_chunks();
  const PipelineTree tree = pipeline_tree(link.rank(), link.size(), root, num);
  const std::uint32_t check =
      descriptor_check(Kind::kBroadcast, count, dtype, ReduceOp::kSum, root);
  auto tag = [&](std::size_t chunk) {
    return Tag{options.seq, static_cast<std::uint32_t>(chunk), check};
  };
  auto bytes_of = [&](std::size_t chunk) { return chunks.elements(chunk) * esize; };
  Waiter waiter(link, options.deadline);

  std::deque<Link::Handle> recvs;
  std::deque<Link::Handle> sends;
  std::size_t posted = 0;
  auto post_recv = [&] {
    recvs.push_back(
        link.recv(tree.parent, tag(posted),
                  std::span<std::byte>(out + chunks.first(posted) * esize, bytes_of(posted))));
    ++posted;
  };
  if (!is_root) {
    while (posted < num && posted < kPipelineDepth) post_recv();
  }
  const std::size_t max_sends = kPipelineDepth * static_cast<std::size_t>(tree.num_children);
  for (std::size_t i = 0; i < num; ++i) {
    if (!is_root) {
      TRIB_RETURN_IF_ERROR(waiter.wait(recvs.front()));
      recvs.pop_front();
      if (posted < num) post_recv();
    }
    const std::span<const std::byte> chunk(src + chunks.first(i) * esize, bytes_of(i));
    for (int c = 0; c < tree.num_children; ++c) {
      sends.push_back(link.send(tree.children[c], tag(i), chunk));
    }
    while (sends.size() > max_sends) {
      TRIB_RETURN_IF_ERROR(waiter.wait(sends.front()));
      sends.pop_front();
    }
  }
  if (is_root && count != 0 && src != out) std::memcpy(out, src, count * esize);
  while (!sends.empty()) {
    TRIB_RETURN_IF_ERROR(waiter.wait(sends.front()));
    sends.pop_front();
  }
  return Status::ok();
}

}  // namespace tributary::algorithms
