#include "algorithms/validate.h"

#include <cstdint>
#include <limits>
#include <string>

namespace tributary::algorithms {

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
    return error(StatusCode::kInvalidArgument, "count " + std::to_string(count) + " x " +
                                                   std::to_string(blocks) +
                                                   " blocks overflows the byte size");
  }
  // Slots are 32-bit; a chunk count beyond that means a chunk size absurdly small for
  // the buffer, which the caller can fix.
  const std::size_t per_chunk = options.chunk_bytes / dtype_size(dtype);
  if (count / (per_chunk == 0 ? 1 : per_chunk) >= std::numeric_limits<std::uint32_t>::max()) {
    return error(StatusCode::kInvalidArgument, "too many chunks; raise chunk_bytes");
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

Status validate_root(const Link& link, int root) {
  if (root < 0 || root >= link.size()) {
    return error(
        StatusCode::kInvalidArgument,
        "root " + std::to_string(root) + " outside a group of " + std::to_string(link.size()));
  }
  return Status::ok();
}

Status validate_buffer(const void* buffer, std::size_t count, const char* name) {
  if (buffer == nullptr && count != 0) {
    return error(StatusCode::kInvalidArgument,
                 std::string(name) + " is null with count " + std::to_string(count));
  }
  return Status::ok();
}

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace tributary::algorithms
