// Element-wise reduction kernels, the inner loop of every collective.
//
// Vectorised through GCC function multi-versioning: each loop is compiled for
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + F16C + FMA) and the baseline, and the loader
// picks the best one for the CPU at run time. Never built with -march=native.
//
// float16 and bfloat16 are accumulated through float32 and rounded back to the
// narrow type with round-to-nearest-even after every pairwise operation, so a reduction
// performed in a fixed order gives the same bits on every machine.
//
// kAvg reduces like kSum; the division by the number of contributors happens once, at
// the end, through scale_by_count(). Integer avg divides with truncation toward zero.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace tributary {

// dst[i] = dst[i] (op) src[i] for i < count. dst and src may alias exactly, not partially.
void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);

// out[i] = a[i] (op) b[i]; out may alias a or b exactly.
void reduce_to(void* out, const void* a, const void* b, std::size_t count, DType dtype,
               ReduceOp op);

// data[i] /= contributors (for kAvg). Contributors must be >= 1.
void scale_by_count(void* data, std::size_t count, DType dtype, int contributors);

// Converts between float32 and the 16-bit float types (round to nearest even; NaN stays
// NaN, quieted). Exposed for codecs and tests.
void float_to_half(const float* in, void* out, std::size_t count);
void half_to_float(const void* in, float* out, std::size_t count);
void float_to_bfloat16(const float* in, void* out, std::size_t count);
void bfloat16_to_float(const void* in, float* out, std::size_t count);

}  // namespace tributary
