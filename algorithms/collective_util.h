// Pieces shared by the rooted and personalised collectives (broadcast, reduce, gather,
// scatter, all_to_all, barrier): argument validation, the Tag::check descriptor, chunking,
// the pipeline tree, and a waiter that enforces the error contract of link.h.
//
// Guarantees these helpers give their callers:
// - descriptor_check() differs (up to a 32-bit hash) whenever kind, count, dtype, op or
//   root differ, so ranks that disagree fail their receives with kMismatch instead of
//   consuming each other's bytes.
// - Chunking and PipelineTree are pure functions of values every rank must agree on
//   (count, dtype, chunk_bytes, size, root), so all ranks derive the same schedule.
// - Waiter::wait() aborts the link before it hands back an error, so an operation still
//   posted on a caller's (or a scratch) buffer cannot touch it after the collective
//   returns, and the error itself is returned unchanged.
// - None of these collectives confirms completion back to senders: a rank that only sends
//   (broadcast root, reduce leaf, gather member) may return kOk while a peer downstream
//   fails. Deciding whether the step counts is the runtime's agreement step, not theirs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/collectives.h"
#include "algorithms/link.h"
#include "core/dtype.h"
#include "core/status.h"

namespace tributary::algorithms {

enum class Kind : std::uint8_t {
  kBroadcast = 1,
  kReduce,
  kGather,
  kScatter,
  kAllToAll,
  kBarrier,
};

// FNV-1a over the collective's descriptor, for Tag::check.
std::uint32_t descriptor_check(Kind kind, std::size_t count, DType dtype, ReduceOp op, int root);

// kInvalidArgument for an unknown dtype, a zero chunk size, a byte size that overflows
// size_t (count * dtype_size * blocks), or a null buffer that would be touched.
Status validate_shape(std::size_t count, DType dtype, std::size_t blocks,
                      const CollectiveOptions& options);
Status validate_root(const Link& link, int root);
Status validate_op(ReduceOp op);
Status validate_buffer(const void* buffer, std::size_t count, const char* name);

// Splits `count` elements into chunks of at most chunk_bytes (at least one element each).
// A zero count still has one empty chunk: every rank then exchanges one message, which
// keeps a rank with count 0 from returning kOk while its peers expect data.
class Chunking {
 public:
  Chunking(std::size_t count, std::size_t element_size, std::size_t chunk_bytes);

  std::size_t num_chunks() const { return num_chunks_; }
  // Elements in the largest chunk (0 when count is 0): the size of one scratch slot.
  std::size_t max_elements() const { return count_ < per_chunk_ ? count_ : per_chunk_; }
  std::size_t first(std::size_t chunk) const { return chunk * per_chunk_; }
  std::size_t elements(std::size_t chunk) const;

 private:
  std::size_t count_;
  std::size_t per_chunk_;
  std::size_t num_chunks_;
};

// A rank's place in the tree that a pipelined broadcast (root to leaves) or reduce
// (leaves to root) runs along. With many chunks it is a chain: every rank sends each chunk
// once, so the pipeline runs at full link speed after n-1 steps of fill. With few chunks it
// is a binary tree: depth log2(n) instead of n-1, at the cost of interior ranks sending
// each chunk twice. The switch is where the two estimated step counts cross.
struct PipelineTree {
  int parent = -1;  // -1 on the root
  int children[2] = {-1, -1};
  int num_children = 0;
};
PipelineTree pipeline_tree(int rank, int size, int root, std::size_t num_chunks);

// Chunks a pipeline keeps in flight per peer: enough that a link is busy while the
// previous chunk is being reduced or forwarded, few enough to bound scratch memory.
inline constexpr std::size_t kPipelineDepth = 4;

class Waiter {
 public:
  Waiter(Link& link, Deadline deadline) : link_(link), deadline_(deadline) {}
  Status wait(Link::Handle handle);

 private:
  Link& link_;
  Deadline deadline_;
};

}  // namespace tributary::algorithms
