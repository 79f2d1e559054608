// Argument checks shared by every collective. Bad arguments are the caller's mistake on
// this rank, reported as kInvalidArgument before any message is sent (so a rank never
// half-joins a collective it cannot run).
#pragma once

#include <cstddef>

#include "algorithms/collectives.h"

namespace tributary::algorithms {

// A known dtype, a non-zero chunk size, count * dtype_size * blocks bytes that fit in
// size_t, and fewer than 2^32 - 1 chunks (slots are 32-bit).
Status validate_shape(std::size_t count, DType dtype, std::size_t blocks,
                      const CollectiveOptions& options);
Status validate_op(ReduceOp op);
Status validate_root(const Link& link, int root);
// A buffer that would be touched (count != 0) is not null; `name` is "send" or "recv".
Status validate_buffer(const void* buffer, std::size_t count, const char* name);

// True when [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes);

}  // namespace tributary::algorithms
