// Element-wise reductions on device memory, with core/reduce.h's semantics to the bit:
// float16 and bfloat16 are widened to float32, combined with one IEEE operation and
// rounded back to nearest even after every pairwise step; min/max order -0 below +0 and
// give +qNaN when either side is NaN; kAvg reduces like kSum (divide once at the end with
// scale_by_count). So a reduction done on the GPU in the same order as on the CPU gives
// the same bits, whichever side ran each step.
//
// Supported: float32, float16, bfloat16 with sum, avg, prod, min, max; anything else is
// kInvalidArgument (the CPU path in core/ covers the rest). Asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"
#include "core/status.h"

namespace tributary::gpu {

// dst[i] = dst[i] (op) src[i]; dst and src may alias exactly.
Status reduce_into(void* d_dst, const void* d_src, std::size_t count, DType dtype, ReduceOp op,
                   cudaStream_t stream);

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... in source order (each step as reduce_into
// rounds it), one pass over the sources; `divide_by` > 0 then divides once as
// scale_by_count(divide_by) would (kAvg). dst may alias a source exactly. At most
// kMaxReduceSources sources (fold more in several calls, dst as the first source).
inline constexpr int kMaxReduceSources = 8;
Status reduce_sources(void* d_dst, const void* const* d_srcs, int sources, std::size_t count,
                      DType dtype, ReduceOp op, int divide_by, cudaStream_t stream);

// data[i] /= contributors (>= 1), rounded as core's scale_by_count.
Status scale_by_count(void* d_data, std::size_t count, DType dtype, int contributors,
                      cudaStream_t stream);

}  // namespace tributary::gpu
