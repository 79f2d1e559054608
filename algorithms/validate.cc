#include "algorithms/validate.h"

#include <cstdint>
#include <limits>
#include <string>

namespace tributary::algorithms {

Status validate_call(const void* send, const void* recv, std::size_t count, std::size_t blocks,
                     DType dtype, const ReduceOp* op, const CollectiveOptions& options) {
  if (!is_valid_dtype(static_cast<std::uint8_t>(dtype))) {
    return error(StatusCode::kInvalidArgument,
                 "unknown dtype " + std::to_string(static_cast<int>(dtype)));
  }
  if (op != nullptr && !is_valid_reduce_op(static_cast<std::uint8_t>(*op))) {
    return error(StatusCode::kInvalidArgument,
                 "unknown reduce op " + std::to_string(static_cast<int>(*op)));
  }
  if (options.chunk_bytes == 0) {
    return error(StatusCode::kInvalidArgument, "chunk_bytes must be positive");
  }
  const std::size_t limit = std::numeric_limits<std::size_t>::max() / dtype_size(dtype);
  if (blocks != 0 && count > limit / blocks) {
    return error(StatusCode::kInvalidArgument, "count " + std::to_string(count) + " x " +
                                                   std::to_string(blocks) +
                                                   " blocks overflows the address space");
  }
  if (count != 0 && (send == nullptr || recv == nullptr)) {
    return error(StatusCode::kInvalidArgument, "null buffer with count " + std::to_string(count));
  }
  return Status::ok();
}

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace tributary::algorithms
