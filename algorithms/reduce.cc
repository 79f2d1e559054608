// Pipelined reduce to the root along the pipeline tree of collective_util.h (the broadcast
// tree run backwards). Each rank combines chunk i as own (op) child 0 (op) child 1, always
// in that order, and passes it to its parent while later chunks are still arriving, so
// each element is reduced in one order fixed by (size, root, chunking): results repeat
// bit for bit. Children's chunks land in kPipelineDepth scratch slots per child; the root
// accumulates straight into recv, interior ranks into their own slots (send is read-only).
#include <cstring>
#include <deque>
#include <vector>

#include "algorithms/collective_util.h"
#include "algorithms/collectives.h"
#include "core/reduce.h"

namespace tributary::algorithms {

Status reduce(Link& link, const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
              int root, const CollectiveOptions& options) {
  TRIB_RETURN_IF_ERROR(validate_shape(count, dtype, 1, options));
  TRIB_RETURN_IF_ERROR(validate_op(op));
  TRIB_RETURN_IF_ERROR(validate_root(link, root));
  const bool is_root = link.rank() == root;
  TRIB_RETURN_IF_ERROR(validate_buffer(send, count, "send"));
  if (is_root) TRIB_RETURN_IF_ERROR(validate_buffer(recv, count, "recv"));

  const std::size_t esize = dtype_size(dtype);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const int n = link.size();
  if (n == 1) {
    if (count != 0 && in != out) std::memcpy(out, in, count * esize);
    return Status::ok();
  }

  const Chunking chunks(count, esize, options.chunk_bytes);
  const std::size_t num = chunks.num_chunks();
  const PipelineTree tree = pipeline_tree(link.rank(), n, root, num);
  const std::uint32_t check = descriptor_check(Kind::kReduce, count, dtype, op, root);
  auto tag = [&](std::size_t chunk) {
    return Tag{options.seq, static_cast<std::uint32_t>(chunk), check};
  };
  Waiter waiter(link, options.deadline);

  const std::size_t depth = num < kPipelineDepth ? num : kPipelineDepth;
  const std::size_t slot_bytes = chunks.max_elements() * esize;
  const std::size_t kids = static_cast<std::size_t>(tree.num_children);
  // [slot][child]: where child c's chunk i arrives, slot = i % depth.
  std::vector<std::byte> from_children(depth * kids * slot_bytes);
  auto child_slot = [&](std::size_t chunk, int c) {
    return from_children.data() +
           ((chunk % depth) * kids + static_cast<std::size_t>(c)) * slot_bytes;
  };
  // Interior ranks need somewhere to combine; leaves send their input as it is.
  std::vector<std::byte> partial(!is_root && kids > 0 ? depth * slot_bytes : 0);

  std::deque<Link::Handle> recvs;  // chunk-major, child-minor
  std::deque<Link::Handle> sends;
  std::size_t posted = 0;
  auto post_recvs = [&] {
    const std::size_t bytes = chunks.elements(posted) * esize;
    for (int c = 0; c < tree.num_children; ++c) {
      recvs.push_back(link.recv(tree.children[c], tag(posted),
                                std::span<std::byte>(child_slot(posted, c), bytes)));
    }
    ++posted;
  };
  while (posted < depth) post_recvs();

  for (std::size_t i = 0; i < num; ++i) {
    const std::size_t elems = chunks.elements(i);
    const std::size_t offset = chunks.first(i) * esize;
    const std::byte* own = in + offset;
    // The partial slot about to be reused held chunk i - depth; its send must be done.
    if (!is_root && sends.size() >= depth) {
      TRIB_RETURN_IF_ERROR(waiter.wait(sends.front()));
      sends.pop_front();
    }
    std::byte* acc = nullptr;
    if (is_root) {
      acc = out + offset;
    } else if (kids > 0) {
      acc = partial.data() + (i % depth) * slot_bytes;
    }
    for (int c = 0; c < tree.num_children; ++c) {
      TRIB_RETURN_IF_ERROR(waiter.wait(recvs.front()));
      recvs.pop_front();
      if (c == 0) {
        reduce_to(acc, own, child_slot(i, c), elems, dtype, op);
      } else {
        reduce_into(acc, child_slot(i, c), elems, dtype, op);
      }
    }
    if (posted < num) post_recvs();
    if (is_root) continue;
    const std::byte* payload = kids > 0 ? acc : own;
    sends.push_back(
        link.send(tree.parent, tag(i), std::span<const std::byte>(payload, elems * esize)));
  }
  while (!sends.empty()) {
    TRIB_RETURN_IF_ERROR(waiter.wait(sends.front()));
    sends.pop_front();
  }
  if (is_root && op == ReduceOp::kAvg) scale_by_count(out, count, dtype, n);
  return Status::ok();
}

}  // namespace tributary::algorithms
