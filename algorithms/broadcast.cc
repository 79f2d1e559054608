// Pipelined broadcast along the pipeline tree of tree_shape.h. Every non-root rank keeps
// kPipelineDepth receives posted ahead, directly into the caller's recv buffer, and
// forwards chunk i to its children as soon as it lands, while chunks i+1.. are arriving.
// The root sends straight from `send`, so an out-of-place root copy overlaps the sends.
//
// Like reduce, gather and scatter, it does not confirm completion back to senders: a rank
// that only sends may return kOk while a peer downstream fails. Whether the step counts is
// decided by the runtime's agreement round (agreement.h), not here.
#include <cstring>
#include <deque>

#include "algorithms/collectives.h"
#include "algorithms/in_flight.h"
#include "algorithms/partition.h"
#include "algorithms/tags.h"
#include "algorithms/tree_shape.h"
#include "algorithms/validate.h"

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

  const Range all{0, count};
  const std::size_t per_chunk = chunk_elements(options.chunk_bytes, esize);
  const std::size_t num = num_messages(count, per_chunk);
  const TreeNode tree = pipeline_tree(link.rank(), link.size(), root, num);
  const TagMaker tags(
      options.seq,
      Descriptor{.kind = Collective::kBroadcast, .count = count, .dtype = dtype, .root = root});
  auto bytes_of = [&](std::size_t chunk) {
    const Range r = chunk_of(all, per_chunk, chunk);
    return std::span<std::byte>(out + r.begin * esize, r.count * esize);
  };

  std::deque<Link::Handle> recvs;
  std::size_t posted = 0;
  auto post_recv = [&] {
    recvs.push_back(link.recv(tree.parent, tags.at(posted), bytes_of(posted)));
    ++posted;
  };
  if (!is_root) {
    while (posted < num && posted < kPipelineDepth) post_recv();
  }
  SendWindow sends(link, options.deadline,
                   kPipelineDepth * static_cast<std::size_t>(tree.num_children));
  for (std::size_t i = 0; i < num; ++i) {
    if (!is_root) {
      TRIB_RETURN_IF_ERROR(wait_or_abort(link, recvs.front(), options.deadline));
      recvs.pop_front();
      if (posted < num) post_recv();
    }
    const Range r = chunk_of(all, per_chunk, i);
    const std::span<const std::byte> chunk(src + r.begin * esize, r.count * esize);
    for (int c = 0; c < tree.num_children; ++c) {
      TRIB_RETURN_IF_ERROR(sends.add(link.send(tree.children[c], tags.at(i), chunk)));
    }
  }
  if (is_root && count != 0 && src != out) std::memcpy(out, src, count * esize);
  return sends.drain();
}

}  // namespace tributary::algorithms
