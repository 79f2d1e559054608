// Reduction kernels. Each (dtype, op) pair gets a plain loop that GCC auto-vectorises;
// TRIB_MULTIVERSION compiles every loop for AVX-512, AVX2 and the baseline and binds the
// best at load time (ifunc), so one shipped binary runs everywhere at full width.
#include "core/reduce.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <immintrin.h>

#include "core/check.h"

#ifndef TRIB_REDUCE_SINGLE_LEVEL
#define TRIB_MULTIVERSION \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define TRIB_LEVEL_DEFAULT __attribute__((target("default")))
#define TRIB_BUILD_LEVEL(n) 1
#else
// Test builds only (tests/core/CMakeLists.txt): one level alone, 0 (baseline), 3 or 4, so
// that reduce_test can check every clone on a machine whose loader would pick just one.
#define TRIB_LEVEL_DEFAULT
#define TRIB_BUILD_LEVEL(n) ((n) == TRIB_REDUCE_SINGLE_LEVEL)
#if TRIB_REDUCE_SINGLE_LEVEL == 4
#define TRIB_MULTIVERSION __attribute__((target("arch=x86-64-v4")))
#elif TRIB_REDUCE_SINGLE_LEVEL == 3
#define TRIB_MULTIVERSION __attribute__((target("arch=x86-64-v3")))
#else
#define TRIB_MULTIVERSION
#endif
#endif

namespace tributary {
namespace {

// --- 16-bit floats -----------------------------------------------------------------
//
// Both narrow types are stored as raw bits and converted with integer/float bit
// arithmetic written as straight-line selects, so GCC vectorises the conversions in every
// clone. (GCC 12 does not vectorise _Float16 <-> float casts, not even with F16C: each
// element became a scalar vcvtph2ps, and the baseline clone a libgcc call.) The results
// are bit-identical to F16C's vcvtph2ps / vcvtps2ph with round-to-nearest-even.

struct f16 {
  std::uint16_t bits;
};
struct bf16 {
  std::uint16_t bits;
};

inline float bf16_to_f32(bf16 h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16);
}

inline bf16 f32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  // NaN: keep the sign and payload top, force a quiet bit so it cannot become infinity.
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t r = is_nan ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<std::uint16_t>(r >> 16)};
}

inline float f16_to_f32(f16 h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t em = static_cast<std::uint32_t>(h.bits & 0x7fffu) << 13;
  const std::uint32_t exp = em & 0x0f800000u;
  // Normal: rebias the exponent (+112). Inf/NaN: exponent all ones, NaN quieted.
  // Subnormal: m * 2^-24, computed exactly as (2^-14 + m * 2^-24) - 2^-14.
  const std::uint32_t normal = em + 0x38000000u;
  const std::uint32_t infnan = em | 0x7f800000u | (em & 0x007fe000u ? 0x00400000u : 0u);
  const float magic = std::bit_cast<float>(0x38800000u);  // 2^-14
  const std::uint32_t sub =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(em + 0x38800000u) - magic);
  const std::uint32_t mag = exp == 0x0f800000u ? infnan : exp == 0 ? sub : normal;
  return std::bit_cast<float>(sign | mag);
}

inline f16 f32_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  // Normal range: rebias (-112) and round to nearest even at bit 13; a carry out of the
  // mantissa rounds up to the next binade and, past 65504, to infinity, as it should.
  const std::uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14 (half subnormal or zero): adding 0.5f makes the FPU round to a multiple of
  // 2^-24 with nearest-even; the low mantissa bits are then the half subnormal.
  const std::uint32_t sub =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3f000000u;
  // At or above 65536 (2^16): infinity; NaN keeps the payload top, quieted.
  const std::uint32_t big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x03ffu) : 0x7c00u;
  const std::uint32_t mag = a >= 0x47800000u ? big : a < 0x38800000u ? sub : normal;
  return f16{static_cast<std::uint16_t>(sign | mag)};
}

// --- element operations, on the accumulation type ---------------------------------

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

template <typename T>
using Wide = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T>
inline Wide<T> widen(T v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16_to_f32(v);
  } else if constexpr (std::is_same_v<T, f16>) {
    return f16_to_f32(v);
  } else {
    return v;
  }
}

template <typename T>
inline T narrow(Wide<T> v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return f32_to_bf16(v);
  } else if constexpr (std::is_same_v<T, f16>) {
    return f32_to_f16(v);
  } else {
    return v;
  }
}

// Integer arithmetic wraps (two's complement), as in NCCL and MPI implementations.
template <typename W>
inline W wrap_add(W a, W b) {
  if constexpr (std::is_integral_v<W>) {
    using U = std::make_unsigned_t<W>;
    return static_cast<W>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename W>
inline W wrap_mul(W a, W b) {
  if constexpr (std::is_integral_v<W>) {
    using U = std::conditional_t<sizeof(W) < sizeof(unsigned), unsigned, std::make_unsigned_t<W>>;
    return static_cast<W>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// Floating min/max are commutative to the bit, so that reduce_to's aliased forms (which
// swap operands) and any reduction tree give identical bits: -0 is below +0 (as IEEE
// 754-2019 minimum/maximum), and a NaN on either side gives the default quiet NaN
// (+qNaN; the inputs' signs and payloads are dropped). Three compares and selects; keeping
// a payload by rule cost twice that and halved in-cache throughput.
template <typename W, bool kMin>
inline W float_minmax(W a, W b) {
  using U = std::conditional_t<sizeof(W) == 4, std::uint32_t, std::uint64_t>;
  constexpr U kQuietNaN = static_cast<U>(sizeof(W) == 4 ? 0x7fc00000u : 0x7ff8000000000000u);
  const U ua = std::bit_cast<U>(a);
  const U ub = std::bit_cast<U>(b);
  const U equal = kMin ? (ua | ub) : (ua & ub);  // differs from a only for +-0
  const bool a_wins = kMin ? a < b : a > b;
  const bool b_wins = kMin ? b < a : b > a;
  return std::bit_cast<W>(a_wins ? ua : b_wins ? ub : a == b ? equal : kQuietNaN);
}

struct OpSum {
  template <typename W>
  static W apply(W a, W b) {
    return wrap_add(a, b);
  }
};
struct OpProd {
  template <typename W>
  static W apply(W a, W b) {
    return wrap_mul(a, b);
  }
};
struct OpMin {
  template <typename W>
  static W apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      return a < b ? a : b;
    } else {
      return float_minmax<W, true>(a, b);
    }
  }
};
struct OpMax {
  template <typename W>
  static W apply(W a, W b) {
    if constexpr (std::is_integral_v<W>) {
      return a > b ? a : b;
    } else {
      return float_minmax<W, false>(a, b);
    }
  }
};

// --- float16 block conversion --------------------------------------------------------
//
// The bit-arithmetic float16 conversions above vectorise but cost ~25 vector operations
// per direction; F16C and AVX-512F convert in one instruction. Intrinsics cannot live in
// a target_clones body (the baseline clone would not compile), so these two helpers are
// multi-versioned by hand with target attributes, at the same three levels; GCC binds
// them through the same kind of ifunc. The float16 kernels convert a block of each input
// into float32 on the stack, apply the op with the shared float loop, and convert back.
// Both paths give identical bits (round to nearest even, independent of MXCSR; NaN
// quieted with its payload top kept); reduce_test checks that across all 65536 halves.

inline void h2f_tail(const f16* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}
inline void f2h_tail(const float* in, f16* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

#if TRIB_BUILD_LEVEL(0)
TRIB_LEVEL_DEFAULT void h2f_block(const f16* __restrict in, float* __restrict out, std::size_t n) {
  h2f_tail(in, out, n);
}
#endif
#if TRIB_BUILD_LEVEL(3)
__attribute__((target("arch=x86-64-v3"))) void h2f_block(const f16* __restrict in,
                                                         float* __restrict out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256 f = _mm256_cvtph_ps(h);
    // vcvtph2ps passes a signalling NaN through unquieted; quiet it like the scalar path.
    const __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
    f = _mm256_or_ps(f, _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000))));
    _mm256_storeu_ps(out + i, f);
  }
  h2f_tail(in + i, out + i, n - i);
}
#endif
#if TRIB_BUILD_LEVEL(4)
__attribute__((target("arch=x86-64-v4"))) void h2f_block(const f16* __restrict in,
                                                         float* __restrict out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    __m512 f = _mm512_cvtph_ps(h);
    const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    f = _mm512_castsi512_ps(_mm512_mask_or_epi32(
        _mm512_castps_si512(f), nan, _mm512_castps_si512(f), _mm512_set1_epi32(0x00400000)));
    _mm512_storeu_ps(out + i, f);
  }
  h2f_tail(in + i, out + i, n - i);
}
#endif

#if TRIB_BUILD_LEVEL(0)
TRIB_LEVEL_DEFAULT void f2h_block(const float* __restrict in, f16* __restrict out, std::size_t n) {
  f2h_tail(in, out, n);
}
#endif
#if TRIB_BUILD_LEVEL(3)
__attribute__((target("arch=x86-64-v3"))) void f2h_block(const float* __restrict in,
                                                         f16* __restrict out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  f2h_tail(in + i, out + i, n - i);
}
#endif
#if TRIB_BUILD_LEVEL(4)
__attribute__((target("arch=x86-64-v4"))) void f2h_block(const float* __restrict in,
                                                         f16* __restrict out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  f2h_tail(in + i, out + i, n - i);
}
#endif

constexpr std::size_t kHalfBlock = 512;  // 2 x 2 KiB of float32 scratch, stays in L1

// Always inlined: an out-of-line copy would be compiled for the baseline only and shared
// by every clone, which silently loses the vector width.
#define TRIB_INLINE inline __attribute__((always_inline))

template <typename T, typename Op>
TRIB_INLINE void loop_into(T* __restrict dst, const T* __restrict src, std::size_t n) {
  if constexpr (std::is_same_v<T, f16>) {
    alignas(64) float fd[kHalfBlock];
    alignas(64) float fs[kHalfBlock];
    for (std::size_t done = 0; done < n; done += kHalfBlock) {
      const std::size_t m = n - done < kHalfBlock ? n - done : kHalfBlock;
      h2f_block(dst + done, fd, m);
      h2f_block(src + done, fs, m);
      for (std::size_t i = 0; i < m; ++i) fd[i] = Op::apply(fd[i], fs[i]);
      f2h_block(fd, dst + done, m);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = narrow<T>(Op::apply(widen(dst[i]), widen(src[i])));
  }
}

template <typename T, typename Op>
TRIB_INLINE void loop_to(T* __restrict out, const T* __restrict a, const T* __restrict b,
                         std::size_t n) {
  if constexpr (std::is_same_v<T, f16>) {
    alignas(64) float fa[kHalfBlock];
    alignas(64) float fb[kHalfBlock];
    for (std::size_t done = 0; done < n; done += kHalfBlock) {
      const std::size_t m = n - done < kHalfBlock ? n - done : kHalfBlock;
      h2f_block(a + done, fa, m);
      h2f_block(b + done, fb, m);
      for (std::size_t i = 0; i < m; ++i) fa[i] = Op::apply(fa[i], fb[i]);
      f2h_block(fa, out + done, m);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = narrow<T>(Op::apply(widen(a[i]), widen(b[i])));
  }
}

#define TRIB_KERNELS(T, NAME)                                                          \
  TRIB_MULTIVERSION void into_sum_##NAME(T* d, const T* s, std::size_t n) {            \
    loop_into<T, OpSum>(d, s, n);                                                      \
  }                                                                                    \
  TRIB_MULTIVERSION void into_prod_##NAME(T* d, const T* s, std::size_t n) {           \
    loop_into<T, OpProd>(d, s, n);                                                     \
  }                                                                                    \
  TRIB_MULTIVERSION void into_min_##NAME(T* d, const T* s, std::size_t n) {            \
    loop_into<T, OpMin>(d, s, n);                                                      \
  }                                                                                    \
  TRIB_MULTIVERSION void into_max_##NAME(T* d, const T* s, std::size_t n) {            \
    loop_into<T, OpMax>(d, s, n);                                                      \
  }                                                                                    \
  TRIB_MULTIVERSION void to_sum_##NAME(T* o, const T* a, const T* b, std::size_t n) {  \
    loop_to<T, OpSum>(o, a, b, n);                                                     \
  }                                                                                    \
  TRIB_MULTIVERSION void to_prod_##NAME(T* o, const T* a, const T* b, std::size_t n) { \
    loop_to<T, OpProd>(o, a, b, n);                                                    \
  }                                                                                    \
  TRIB_MULTIVERSION void to_min_##NAME(T* o, const T* a, const T* b, std::size_t n) {  \
    loop_to<T, OpMin>(o, a, b, n);                                                     \
  }                                                                                    \
  TRIB_MULTIVERSION void to_max_##NAME(T* o, const T* a, const T* b, std::size_t n) {  \
    loop_to<T, OpMax>(o, a, b, n);                                                     \
  }                                                                                    \
  void into_##NAME(void* d, const void* s, std::size_t n, ReduceOp op) {               \
    auto* dd = static_cast<T*>(d);                                                     \
    auto* ss = static_cast<const T*>(s);                                               \
    switch (op) {                                                                      \
      case ReduceOp::kSum:                                                             \
      case ReduceOp::kAvg: return into_sum_##NAME(dd, ss, n);                          \
      case ReduceOp::kProd: return into_prod_##NAME(dd, ss, n);                        \
      case ReduceOp::kMin: return into_min_##NAME(dd, ss, n);                          \
      case ReduceOp::kMax: return into_max_##NAME(dd, ss, n);                          \
    }                                                                                  \
  }                                                                                    \
  void to_##NAME(void* o, const void* a, const void* b, std::size_t n, ReduceOp op) {  \
    auto* oo = static_cast<T*>(o);                                                     \
    auto* aa = static_cast<const T*>(a);                                               \
    auto* bb = static_cast<const T*>(b);                                               \
    switch (op) {                                                                      \
      case ReduceOp::kSum:                                                             \
      case ReduceOp::kAvg: return to_sum_##NAME(oo, aa, bb, n);                        \
      case ReduceOp::kProd: return to_prod_##NAME(oo, aa, bb, n);                      \
      case ReduceOp::kMin: return to_min_##NAME(oo, aa, bb, n);                        \
      case ReduceOp::kMax: return to_max_##NAME(oo, aa, bb, n);                        \
    }                                                                                  \
  }

TRIB_KERNELS(float, f32)
TRIB_KERNELS(double, f64)
TRIB_KERNELS(f16, f16)
TRIB_KERNELS(bf16, bf16)
TRIB_KERNELS(std::int8_t, i8)
TRIB_KERNELS(std::uint8_t, u8)
TRIB_KERNELS(std::int32_t, i32)
TRIB_KERNELS(std::int64_t, i64)

#undef TRIB_KERNELS

template <typename T>
TRIB_INLINE void scale_loop(T* data, std::size_t n, int count) {
  using W = Wide<T>;
  const W divisor = static_cast<W>(count);
  for (std::size_t i = 0; i < n; ++i) data[i] = narrow<T>(static_cast<W>(widen(data[i]) / divisor));
}

TRIB_MULTIVERSION void scale_f32(float* d, std::size_t n, int c) { scale_loop(d, n, c); }
TRIB_MULTIVERSION void scale_f64(double* d, std::size_t n, int c) { scale_loop(d, n, c); }
TRIB_MULTIVERSION void scale_f16(f16* d, std::size_t n, int c) { scale_loop(d, n, c); }
TRIB_MULTIVERSION void scale_bf16(bf16* d, std::size_t n, int c) { scale_loop(d, n, c); }

template <typename T>
void scale_int(T* d, std::size_t n, int c) {
  // Widen to 64 bits so that dividing INT_MIN-like values by the count cannot trap.
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<std::int64_t>(d[i]) / c);
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  if (count == 0 || dst == src) {
    if (dst == src && count != 0) {
      // x op x: still must be computed (sum doubles), via the three-operand form.
      reduce_to(dst, dst, src, count, dtype, op);
    }
    return;
  }
  switch (dtype) {
    case DType::kFloat32: return into_f32(dst, src, count, op);
    case DType::kFloat64: return into_f64(dst, src, count, op);
    case DType::kFloat16: return into_f16(dst, src, count, op);
    case DType::kBFloat16: return into_bf16(dst, src, count, op);
    case DType::kInt8: return into_i8(dst, src, count, op);
    case DType::kUInt8: return into_u8(dst, src, count, op);
    case DType::kInt32: return into_i32(dst, src, count, op);
    case DType::kInt64: return into_i64(dst, src, count, op);
  }
  TRIB_CHECK(false) << "invalid dtype " << static_cast<int>(dtype);
}

namespace {
void reduce_to_disjoint(void* out, const void* a, const void* b, std::size_t count, DType dtype,
                        ReduceOp op) {
  switch (dtype) {
    case DType::kFloat32: return to_f32(out, a, b, count, op);
    case DType::kFloat64: return to_f64(out, a, b, count, op);
    case DType::kFloat16: return to_f16(out, a, b, count, op);
    case DType::kBFloat16: return to_bf16(out, a, b, count, op);
    case DType::kInt8: return to_i8(out, a, b, count, op);
    case DType::kUInt8: return to_u8(out, a, b, count, op);
    case DType::kInt32: return to_i32(out, a, b, count, op);
    case DType::kInt64: return to_i64(out, a, b, count, op);
  }
  TRIB_CHECK(false) << "invalid dtype " << static_cast<int>(dtype);
}
}  // namespace

void reduce_to(void* out, const void* a, const void* b, std::size_t count, DType dtype,
               ReduceOp op) {
  if (count == 0) return;
  if (out == a && out == b) {
    // Element-wise x op x, one element at a time through a scratch copy of one operand.
    unsigned char scratch[4096];
    const std::size_t esize = dtype_size(dtype);
    const std::size_t per = sizeof(scratch) / esize;
    auto* base = static_cast<unsigned char*>(out);
    for (std::size_t done = 0; done < count; done += per) {
      const std::size_t n = count - done < per ? count - done : per;
      std::memcpy(scratch, base + done * esize, n * esize);
      reduce_into(base + done * esize, scratch, n, dtype, op);
    }
    return;
  }
  // Every op is commutative element-wise (min/max propagate NaN symmetrically), so the
  // aliased forms are the two-operand in-place kernels.
  if (out == a) return reduce_into(out, b, count, dtype, op);
  if (out == b) return reduce_into(out, a, count, dtype, op);
  reduce_to_disjoint(out, a, b, count, dtype, op);
}

void scale_by_count(void* data, std::size_t count, DType dtype, int contributors) {
  TRIB_CHECK(contributors >= 1) << "contributors=" << contributors;
  if (count == 0 || contributors == 1) return;
  switch (dtype) {
    case DType::kFloat32: return scale_f32(static_cast<float*>(data), count, contributors);
    case DType::kFloat64: return scale_f64(static_cast<double*>(data), count, contributors);
    case DType::kFloat16: return scale_f16(static_cast<f16*>(data), count, contributors);
    case DType::kBFloat16: return scale_bf16(static_cast<bf16*>(data), count, contributors);
    case DType::kInt8: return scale_int(static_cast<std::int8_t*>(data), count, contributors);
    case DType::kUInt8: return scale_int(static_cast<std::uint8_t*>(data), count, contributors);
    case DType::kInt32: return scale_int(static_cast<std::int32_t*>(data), count, contributors);
    case DType::kInt64: return scale_int(static_cast<std::int64_t*>(data), count, contributors);
  }
  TRIB_CHECK(false) << "invalid dtype " << static_cast<int>(dtype);
}

namespace {
TRIB_MULTIVERSION void f32_to_bf16_loop(const float* __restrict in, bf16* __restrict out,
                                        std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}
TRIB_MULTIVERSION void bf16_to_f32_loop(const bf16* __restrict in, float* __restrict out,
                                        std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}
}  // namespace

void float_to_half(const float* in, void* out, std::size_t n) {
  f2h_block(in, static_cast<f16*>(out), n);
}
void half_to_float(const void* in, float* out, std::size_t n) {
  h2f_block(static_cast<const f16*>(in), out, n);
}
void float_to_bfloat16(const float* in, void* out, std::size_t n) {
  f32_to_bf16_loop(in, static_cast<bf16*>(out), n);
}
void bfloat16_to_float(const void* in, float* out, std::size_t n) {
  bf16_to_f32_loop(static_cast<const bf16*>(in), out, n);
}

}  // namespace tributary
