// Pipelined reduce to the root along the pipeline tree of tree_shape.h (the broadcast tree
// run backwards). Each rank combines chunk i as own (op) child 0 (op) child 1, always in
// that order, and passes it to its parent while later chunks are still arriving, so each
// element is reduced in one order fixed by (size, root, chunking): results repeat bit for
// bit. Children's chunks land in kPipelineDepth scratch slots per child; the root
// accumulates straight into recv, interior ranks into their own slots (send is read-only).
#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/in_flight.h"
#include "algorithms/partition.h"
#include "algorithms/tags.h"
#include "algorithms/tree_shape.h"
#include "algorithms/validate.h"
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

  const Range all{0, count};
  const std::size_t per_chunk = chunk_elements(options.chunk_bytes, esize);
  const std::size_t num = num_messages(count, per_chunk);
  const TreeNode tree = pipeline_tree(link.rank(), n, root, num);
  const TagMaker tags(
      options.seq,
      Descriptor{
          .kind = Collective::kReduce, .count = count, .dtype = dtype, .op = op, .root = root});

  const std::size_t depth = num < kPipelineDepth ? num : kPipelineDepth;
  const std::size_t slot_bytes = std::min(per_chunk, count) * esize;
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
  std::size_t posted = 0;
  auto post_recvs = [&] {
    const std::size_t bytes = chunk_of(all, per_chunk, posted).count * esize;
    for (int c = 0; c < tree.num_children; ++c) {
      recvs.push_back(link.recv(tree.children[c], tags.at(posted),
                                std::span<std::byte>(child_slot(posted, c), bytes)));
    }
    ++posted;
  };
  while (posted < depth) post_recvs();

  // At most depth - 1 sends stay in flight, so the partial slot chunk i reuses (that of
  // chunk i - depth) has been sent before it is written again.
  SendWindow sends(link, options.deadline, depth - 1);
  for (std::size_t i = 0; i < num; ++i) {
    const Range r = chunk_of(all, per_chunk, i);
    const std::byte* own = in + r.begin * esize;
    std::byte* acc = nullptr;
    if (is_root) {
      acc = out + r.begin * esize;
    } else if (kids > 0) {
      acc = partial.data() + (i % depth) * slot_bytes;
    }
    for (int c = 0; c < tree.num_children; ++c) {
      TRIB_RETURN_IF_ERROR(wait_or_abort(link, recvs.front(), options.deadline));
      recvs.pop_front();
      if (c == 0) {
        reduce_to(acc, own, child_slot(i, c), r.count, dtype, op);
      } else {
        reduce_into(acc, child_slot(i, c), r.count, dtype, op);
      }
    }
    if (posted < num) post_recvs();
    if (is_root) continue;
    const std::byte* payload = kids > 0 ? acc : own;
    TRIB_RETURN_IF_ERROR(sends.add(
        link.send(tree.parent, tags.at(i), std::span<const std::byte>(payload, r.count * esize))));
  }
  TRIB_RETURN_IF_ERROR(sends.drain());
  if (is_root && op == ReduceOp::kAvg) scale_by_count(out, count, dtype, n);
  return Status::ok();
}

}  // namespace tributary::algorithms
