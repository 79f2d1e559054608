// Argument checks shared by all_reduce, reduce_scatter and all_gather. Bad arguments are
// the caller's mistake on this rank, reported as kInvalidArgument before any message is
// sent (so a rank never half-joins a collective it cannot run).
#pragma once

#include <cstddef>

#include "algorithms/collectives.h"

namespace tributary::algorithms {

// dtype (and op, when `op` is given) are known enum values, the chunk size is non-zero,
// blocks * count elements fit in size_t bytes, and buffers are non-null when touched.
Status validate_call(const void* send, const void* recv, std::size_t count, std::size_t blocks,
                     DType dtype, const ReduceOp* op, const CollectiveOptions& options);

// True when [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes);

}  // namespace tributary::algorithms
