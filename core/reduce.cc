// Reduction kernels. Each (dtype, op) pair gets a plain loop that GCC auto-vectorises;
// TRIB_MULTIVERSION compiles every loop for AVX-512, AVX2 and the baseline and binds the
// best at load time (ifunc), so one shipped binary runs everywhere at full width.
#include "core/reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/check.h"

#define TRIB_MULTIVERSION \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace tributary {
namespace {

// --- 16-bit floats -----------------------------------------------------------------

using f16 = _Float16;
struct bf16 {
  std::uint16_t bits;
};

inline float bf16_to_f32(bf16 h) {
  std::uint32_t u = static_cast<std::uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 f32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  // NaN: keep the sign and payload top, force a quiet bit so it cannot become infinity.
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // nearest even
  const std::uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return bf16{static_cast<std::uint16_t>(is_nan ? quiet_nan : rounded)};
}

// --- element operations, on the accumulation type ---------------------------------

template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, f16> || std::is_same_v<T, bf16>, float, T>;

template <typename T>
inline Wide<T> widen(T v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16_to_f32(v);
  } else if constexpr (std::is_same_v<T, f16>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

template <typename T>
inline T narrow(Wide<T> v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return f32_to_bf16(v);
  } else if constexpr (std::is_same_v<T, f16>) {
    return static_cast<f16>(v);
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

// min/max propagate NaN from either side, so the result does not depend on operand order.
struct OpSum { template <typename W> static W apply(W a, W b) { return wrap_add(a, b); } };
struct OpProd { template <typename W> static W apply(W a, W b) { return wrap_mul(a, b); } };
struct OpMin { template <typename W> static W apply(W a, W b) { return (a != a || a < b) ? a : b; } };
struct OpMax { template <typename W> static W apply(W a, W b) { return (a != a || a > b) ? a : b; } };

template <typename T, typename Op>
inline void loop_into(T* __restrict dst, const T* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = narrow<T>(Op::apply(widen(dst[i]), widen(src[i])));
}

template <typename T, typename Op>
inline void loop_to(T* __restrict out, const T* __restrict a, const T* __restrict b,
                    std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = narrow<T>(Op::apply(widen(a[i]), widen(b[i])));
}

#define TRIB_KERNELS(T, NAME)                                                                \
  TRIB_MULTIVERSION void into_sum_##NAME(T* d, const T* s, std::size_t n) {                  \
    loop_into<T, OpSum>(d, s, n);                                                            \
  }                                                                                          \
  TRIB_MULTIVERSION void into_prod_##NAME(T* d, const T* s, std::size_t n) {                 \
    loop_into<T, OpProd>(d, s, n);                                                           \
  }                                                                                          \
  TRIB_MULTIVERSION void into_min_##NAME(T* d, const T* s, std::size_t n) {                  \
    loop_into<T, OpMin>(d, s, n);                                                            \
  }                                                                                          \
  TRIB_MULTIVERSION void into_max_##NAME(T* d, const T* s, std::size_t n) {                  \
    loop_into<T, OpMax>(d, s, n);                                                            \
  }                                                                                          \
  TRIB_MULTIVERSION void to_sum_##NAME(T* o, const T* a, const T* b, std::size_t n) {        \
    loop_to<T, OpSum>(o, a, b, n);                                                           \
  }                                                                                          \
  TRIB_MULTIVERSION void to_prod_##NAME(T* o, const T* a, const T* b, std::size_t n) {       \
    loop_to<T, OpProd>(o, a, b, n);                                                          \
  }                                                                                          \
  TRIB_MULTIVERSION void to_min_##NAME(T* o, const T* a, const T* b, std::size_t n) {        \
    loop_to<T, OpMin>(o, a, b, n);                                                           \
  }                                                                                          \
  TRIB_MULTIVERSION void to_max_##NAME(T* o, const T* a, const T* b, std::size_t n) {        \
    loop_to<T, OpMax>(o, a, b, n);                                                           \
  }                                                                                          \
  void into_##NAME(void* d, const void* s, std::size_t n, ReduceOp op) {                     \
    auto* dd = static_cast<T*>(d);                                                           \
    auto* ss = static_cast<const T*>(s);                                                     \
    switch (op) {                                                                            \
      case ReduceOp::kSum:                                                                   \
      case ReduceOp::kAvg: return into_sum_##NAME(dd, ss, n);                                \
      case ReduceOp::kProd: return into_prod_##NAME(dd, ss, n);                              \
      case ReduceOp::kMin: return into_min_##NAME(dd, ss, n);                                \
      case ReduceOp::kMax: return into_max_##NAME(dd, ss, n);                                \
    }                                                                                        \
  }                                                                                          \
  void to_##NAME(void* o, const void* a, const void* b, std::size_t n, ReduceOp op) {        \
    auto* oo = static_cast<T*>(o);                                                           \
    auto* aa = static_cast<const T*>(a);                                                     \
    auto* bb = static_cast<const T*>(b);                                                     \
    switch (op) {                                                                            \
      case ReduceOp::kSum:                                                                   \
      case ReduceOp::kAvg: return to_sum_##NAME(oo, aa, bb, n);                              \
      case ReduceOp::kProd: return to_prod_##NAME(oo, aa, bb, n);                            \
      case ReduceOp::kMin: return to_min_##NAME(oo, aa, bb, n);                              \
      case ReduceOp::kMax: return to_max_##NAME(oo, aa, bb, n);                              \
    }                                                                                        \
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
inline void scale_loop(T* data, std::size_t n, int count) {
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
TRIB_MULTIVERSION void f32_to_f16_loop(const float* __restrict in, f16* __restrict out,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<f16>(in[i]);
}
TRIB_MULTIVERSION void f16_to_f32_loop(const f16* __restrict in, float* __restrict out,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}
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
  f32_to_f16_loop(in, static_cast<f16*>(out), n);
}
void half_to_float(const void* in, float* out, std::size_t n) {
  f16_to_f32_loop(static_cast<const f16*>(in), out, n);
}
void float_to_bfloat16(const float* in, void* out, std::size_t n) {
  f32_to_bf16_loop(in, static_cast<bf16*>(out), n);
}
void bfloat16_to_float(const void* in, float* out, std::size_t n) {
  bf16_to_f32_loop(static_cast<const bf16*>(in), out, n);
}

}  // namespace tributary
