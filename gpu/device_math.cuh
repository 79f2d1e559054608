// Device-side ports of the scalar definitions the CPU code fixes: the counter RNG
// (compression/counter_rng.h), core/reduce.cc's float16/bfloat16 converters and its
// float min/max. Internal to gpu/; every function here must give the same bits as its CPU
// original (tests/gpu checks them through the codecs and reductions).
//
// Floating point: each step is one IEEE operation with an explicit rounding intrinsic
// (__fmul_rn, __fadd_rn, ...), so neither FMA contraction nor a fast-math flag can change
// the result; tributary_gpu also builds with -fmad=false and without --use_fast_math
// (denormals are kept, as on the CPU).
#pragma once

#include <cstdint>

#include "compression/counter_rng.h"

namespace tributary::gpu::detail {

// The CPU's constexpr definition itself (built with --expt-relaxed-constexpr), so there is
// one source of truth for the RNG.
__device__ __forceinline__ std::uint32_t rng_bits(std::uint32_t k0, std::uint32_t k1,
                                                  std::uint32_t lo, std::uint32_t hi) {
  return compression::lowbias32(compression::lowbias32(lo ^ k0) ^ k1 ^ hi);
}

// float(bits >> 8) * 2^-24, exactly as compression::rng_uniform.
__device__ __forceinline__ float rng_uniform(std::uint32_t bits) {
  return __fmul_rn(__uint2float_rn(bits >> 8), 0x1p-24f);
}

__device__ __forceinline__ std::uint32_t abs_bits(float f) {
  return __float_as_uint(f) & 0x7fffffffu;
}

// --- 16-bit floats (core/reduce.cc, bit for bit) --------------------------------------

__device__ __forceinline__ float bf16_to_f32(std::uint16_t h) {
  return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}

__device__ __forceinline__ std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = __float_as_uint(f);
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t r = is_nan ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(r >> 16);
}

__device__ __forceinline__ float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = static_cast<std::uint32_t>(h & 0x7fffu) << 13;
  const std::uint32_t exp = em & 0x0f800000u;
  const std::uint32_t normal = em + 0x38000000u;
  const std::uint32_t infnan = em | 0x7f800000u | ((em & 0x007fe000u) ? 0x00400000u : 0u);
  const float magic = __uint_as_float(0x38800000u);  // 2^-14
  const std::uint32_t sub = __float_as_uint(__fsub_rn(__uint_as_float(em + 0x38800000u), magic));
  const std::uint32_t mag = exp == 0x0f800000u ? infnan : exp == 0 ? sub : normal;
  return __uint_as_float(sign | mag);
}

__device__ __forceinline__ std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = __float_as_uint(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  const std::uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  const std::uint32_t sub = __float_as_uint(__fadd_rn(__uint_as_float(a), 0.5f)) - 0x3f000000u;
  const std::uint32_t big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x03ffu) : 0x7c00u;
  const std::uint32_t mag = a >= 0x47800000u ? big : a < 0x38800000u ? sub : normal;
  return static_cast<std::uint16_t>(sign | mag);
}

// Float min/max commutative to the bit (core/reduce.cc's float_minmax): -0 < +0, and a
// NaN on either side gives +qNaN.
template <bool kMin>
__device__ __forceinline__ float float_minmax(float a, float b) {
  const std::uint32_t ua = __float_as_uint(a);
  const std::uint32_t ub = __float_as_uint(b);
  const std::uint32_t equal = kMin ? (ua | ub) : (ua & ub);
  const bool a_wins = kMin ? a < b : a > b;
  const bool b_wins = kMin ? b < a : b > a;
  return __uint_as_float(a_wins ? ua : b_wins ? ub : a == b ? equal : 0x7fc00000u);
}

}  // namespace tributary::gpu::detail
