#include "algorithms/collective_util.h"

#include <limits>
#include <string>

#include "core/check.h"

namespace tributary::algorithms {
namespace {

std::uint32_t fnv1a(std::uint32_t h, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    h ^= static_cast<std::uint32_t>((value >> (8 * i)) & 0xffu);
    h *= 16777619u;
  }
  return h;
}

int floor_log2(int n) {
  int d = 0;
  while ((2 << d) <= n) ++d;
  return d;
}

}  // namespace

std::uint32_t descriptor_check(Kind kind, std::size_t count, DType dtype, ReduceOp op, int root) {
  std::uint32_t h = 2166136261u;
  h = fnv1a(h, static_cast<std::uint8_t>(kind), 1);
  h = fnv1a(h, static_cast<std::uint64_t>(count), 8);
  h = fnv1a(h, static_cast<std::uint8_t>(dtype), 1);
  h = fnv1a(h, static_cast<std::uint8_t>(op), 1);
  h = fnv1a(h, static_cast<std::uint32_t>(root), 4);
  return h;
}

Status validate_shape(std::size_t count, DType dtype, std::size_t blocks,
                      const CollectiveOptions& options) {
  if (!is_valid_dtype(static_cast<std::uint8_t>(dtype))) {
    return error(StatusCode::kInvalidArgument,
                 "unknown dtype " + std::to_string(static_cast<int>(dtype)));
  }
  if (options.chunk_bytes == 0) {
    return error(StatusCode::kInvalidArgument, "chunk_bytes must be positive");
  }
  const std::size_t limit =
      std::numeric_limits<std::size_t>::max() / dtype_size(dtype) / (blocks == 0 ? 1 : blocks);
  if (count > limit) {
    return error(StatusCode::kInvalidArgument,
                 "count " + std::to_string(count) + " overflows the byte size");
  }
  // Slots are 32-bit; a chunk count beyond that means a chunk size absurdly small for
  // the buffer, which the caller can fix.
  const std::size_t per_chunk = options.chunk_bytes / dtype_size(dtype);
  if (count / (per_chunk == 0 ? 1 : per_chunk) >= std::numeric_limits<std::uint32_t>::max()) {
    return error(StatusCode::kInvalidArgument, "too many chunks; raise chunk_bytes");
  }
  return Status::ok();
}

Status validate_root(const Link& link, int root) {
  if (root < 0 || root >= link.size()) {
    return error(
        StatusCode::kInvalidArgument,
        "root " + std::to_string(root) + " outside a group of " + std::to_string(link.size()));
  }
  return Status::ok();
}

Status validate_op(ReduceOp op) {
  if (!is_valid_reduce_op(static_cast<std::uint8_t>(op))) {
    return error(StatusCode::kInvalidArgument,
                 "unknown reduce op " + std::to_string(static_cast<int>(op)));
  }
  return Status::ok();
}

Status validate_buffer(const void* buffer, std::size_t count, const char* name) {
  if (buffer == nullptr && count != 0) {
    return error(StatusCode::kInvalidArgument, std::string(name) + " is null");
  }
  return Status::ok();
}

Chunking::Chunking(std::size_t count, std::size_t element_size, std::size_t chunk_bytes)
    : count_(count) {
  TRIB_CHECK(element_size > 0 && chunk_bytes > 0)
      << "element_size=" << element_size << " chunk_bytes=" << chunk_bytes;
  per_chunk_ = chunk_bytes / element_size;
  if (per_chunk_ == 0) per_chunk_ = 1;
  num_chunks_ = count == 0 ? 1 : (count + per_chunk_ - 1) / per_chunk_;
}

std::size_t Chunking::elements(std::size_t chunk) const {
  TRIB_CHECK(chunk < num_chunks_) << "chunk " << chunk << " of " << num_chunks_;
  const std::size_t begin = first(chunk);
  return count_ - begin < per_chunk_ ? count_ - begin : per_chunk_;
}

PipelineTree pipeline_tree(int rank, int size, int root, std::size_t num_chunks) {
  TRIB_CHECK(size >= 1 && rank >= 0 && rank < size && root >= 0 && root < size)
      << "rank=" << rank << " size=" << size << " root=" << root;
  // Positions are relative to the root so that any root gets the same shape.
  const int v = (rank - root + size) % size;
  auto actual = [&](int pos) { return (pos + root) % size; };
  PipelineTree t;
  // Chain: C + n - 2 steps. Binary tree: about 2 (C + depth - 1) steps.
  const std::size_t n = static_cast<std::size_t>(size);
  const bool chain = n <= num_chunks + 2 * static_cast<std::size_t>(floor_log2(size));
  if (chain) {
    if (v > 0) t.parent = actual(v - 1);
    if (v + 1 < size) t.children[t.num_children++] = actual(v + 1);
  } else {
    if (v > 0) t.parent = actual((v - 1) / 2);
    for (int c = 2 * v + 1; c <= 2 * v + 2 && c < size; ++c) {
      t.children[t.num_children++] = actual(c);
    }
  }
  return t;
}

Status Waiter::wait(Link::Handle handle) {
  Status st = link_.wait(handle, deadline_);
  if (!st.is_ok()) link_.abort(st);
  return st;
}

}  // namespace tributary::algorithms
