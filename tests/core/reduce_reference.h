// The scalar reference the reduction tests hold every kernel clone to, written here from
// the IEEE definitions (double arithmetic), independent of core/reduce.cc: 16-bit float
// conversions, element operations per dtype and op, an exact-bits comparison (NaN payloads
// aside where IEEE leaves them to the hardware), and random inputs with the interesting
// values mixed in.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/hash.h"
#include "core/reduce.h"

namespace tributary::testing {

// --- reference conversions, written from the IEEE definitions (double arithmetic) ----

inline float ref_half_to_float(std::uint16_t h) {
  const bool neg = (h & 0x8000u) != 0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 31) {
    if (m == 0) return neg ? -INFINITY : INFINITY;
    const std::uint32_t bits =
        (neg ? 0x80000000u : 0u) | 0x7fc00000u | (static_cast<std::uint32_t>(m) << 13);
    return std::bit_cast<float>(bits);  // quieted, payload kept
  }
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return static_cast<float>(neg ? -mag : mag);
}

// Rounds |x| (finite) to an integer number of units 2^unit_exp, nearest even.
inline double rne_units(double x, int unit_exp) { return std::nearbyint(std::ldexp(x, -unit_exp)); }

inline std::uint16_t ref_float_to_half(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return sign | 0x7e00u | ((u >> 13) & 0x3ffu);
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00u;  // 65520 is the tie 65504|65536: even is inf
  if (a < std::ldexp(1.0, -14)) {
    return sign | static_cast<std::uint16_t>(rne_units(a, -24));  // 1024 is 2^-14: fine
  }
  int ex = 0;
  std::frexp(a, &ex);  // a = fr * 2^ex, fr in [0.5, 1)
  int e = ex - 1;
  double q = rne_units(a, e - 10);  // in [1024, 2048]
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  if (e + 15 >= 31) return sign | 0x7c00u;
  return sign | static_cast<std::uint16_t>(((e + 15) << 10) | (static_cast<int>(q) - 1024));
}

inline float ref_bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

inline std::uint16_t ref_float_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | 0x7f80u;
  if (a < std::ldexp(1.0, -126)) {
    return sign | static_cast<std::uint16_t>(rne_units(a, -133));  // 128 units: smallest normal
  }
  int ex = 0;
  std::frexp(a, &ex);
  int e = ex - 1;
  double q = rne_units(a, e - 7);  // in [128, 256]
  if (q == 256.0) {
    q = 128.0;
    ++e;
  }
  if (e + 127 >= 255) return sign | 0x7f80u;
  return sign | static_cast<std::uint16_t>(((e + 127) << 7) | (static_cast<int>(q) - 128));
}

// --- reference element operations --------------------------------------------------

template <typename W>
W ref_minmax(W a, W b, bool is_min) {
  using U = std::conditional_t<sizeof(W) == 4, std::uint32_t, std::uint64_t>;
  const U ua = std::bit_cast<U>(a);
  const U ub = std::bit_cast<U>(b);
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<W>::quiet_NaN();  // +qNaN
  if (a == b) return std::bit_cast<W>(is_min ? (ua | ub) : (ua & ub));
  return is_min ? (a < b ? a : b) : (a > b ? a : b);
}

template <typename W>
W ref_apply(W a, W b, ReduceOp op) {
  if constexpr (std::is_integral_v<W>) {
    using U = std::make_unsigned_t<W>;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return static_cast<W>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::kProd:
        // Through uint64: modular, and no int promotion overflow for the narrow types.
        return static_cast<W>(
            static_cast<U>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b)));
      case ReduceOp::kMin: return a < b ? a : b;
      case ReduceOp::kMax: return a > b ? a : b;
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return a + b;
      case ReduceOp::kProd: return a * b;
      case ReduceOp::kMin: return ref_minmax(a, b, true);
      case ReduceOp::kMax: return ref_minmax(a, b, false);
    }
  }
  return W{};
}

// One reference element of `dtype`: a op b on raw storage, and x / contributors.
template <typename S, typename W>
struct Codec {
  W (*widen)(S);
  S (*narrow)(W);
};

template <typename T>
T ident(T v) {
  return v;
}
inline float h2f(std::uint16_t h) { return ref_half_to_float(h); }
inline std::uint16_t f2h(float f) { return ref_float_to_half(f); }
inline float b2f(std::uint16_t h) { return ref_bf16_to_float(h); }
inline std::uint16_t f2b(float f) { return ref_float_to_bf16(f); }

template <typename S, typename W>
inline void ref_reduce_typed(void* out, const void* a, const void* b, std::size_t n, ReduceOp op,
                             Codec<S, W> c) {
  for (std::size_t i = 0; i < n; ++i) {
    S x, y;
    std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(S), sizeof(S));
    std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(S), sizeof(S));
    const S r = c.narrow(ref_apply<W>(c.widen(x), c.widen(y), op));
    std::memcpy(static_cast<char*>(out) + i * sizeof(S), &r, sizeof(S));
  }
}

template <typename S, typename W>
inline void ref_scale_typed(void* data, std::size_t n, int k, Codec<S, W> c) {
  for (std::size_t i = 0; i < n; ++i) {
    S x;
    std::memcpy(&x, static_cast<char*>(data) + i * sizeof(S), sizeof(S));
    S r;
    if constexpr (std::is_integral_v<W>) {
      r = static_cast<S>(static_cast<std::int64_t>(x) / k);  // truncation toward zero
    } else {
      r = c.narrow(c.widen(x) / static_cast<W>(k));
    }
    std::memcpy(static_cast<char*>(data) + i * sizeof(S), &r, sizeof(S));
  }
}

template <typename F>
inline void with_codec(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(Codec<float, float>{ident<float>, ident<float>});
    case DType::kFloat64: return f(Codec<double, double>{ident<double>, ident<double>});
    case DType::kFloat16: return f(Codec<std::uint16_t, float>{h2f, f2h});
    case DType::kBFloat16: return f(Codec<std::uint16_t, float>{b2f, f2b});
    case DType::kInt8:
      return f(Codec<std::int8_t, std::int8_t>{ident<std::int8_t>, ident<std::int8_t>});
    case DType::kUInt8:
      return f(Codec<std::uint8_t, std::uint8_t>{ident<std::uint8_t>, ident<std::uint8_t>});
    case DType::kInt32:
      return f(Codec<std::int32_t, std::int32_t>{ident<std::int32_t>, ident<std::int32_t>});
    case DType::kInt64:
      return f(Codec<std::int64_t, std::int64_t>{ident<std::int64_t>, ident<std::int64_t>});
  }
}

inline void ref_reduce(void* out, const void* a, const void* b, std::size_t n, DType t,
                       ReduceOp op) {
  with_codec(t, [&](auto c) { ref_reduce_typed(out, a, b, n, op, c); });
}
inline void ref_scale(void* data, std::size_t n, DType t, int k) {
  with_codec(t, [&](auto c) { ref_scale_typed(data, n, k, c); });
}

// --- comparison ----------------------------------------------------------------------

inline bool is_nan_elem(const std::byte* p, DType t) {
  switch (t) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    case DType::kFloat16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fffu) > 0x7c00u;
    }
    case DType::kBFloat16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fffu) > 0x7f80u;
    }
    default: return false;
  }
}

// An element as a hex number (most significant byte first), for failure messages.
inline std::string hex(const std::byte* p, std::size_t n) {
  const std::vector<std::byte> msb_first(std::reverse_iterator(p + n), std::reverse_iterator(p));
  return "0x" + to_hex(std::span<const std::byte>(msb_first));
}

// Exact bits, except where IEEE leaves a NaN's payload to the hardware: sum and prod of two
// NaNs (x86 keeps the first source's payload, and the compiler may swap operands). min and
// max choose their NaN by rule, so they compare exactly.
inline ::testing::AssertionResult same_elements(const std::byte* got, const std::byte* want,
                                                std::size_t n, DType t, ReduceOp op) {
  const std::size_t es = dtype_size(t);
  const bool nan_any_payload = op != ReduceOp::kMin && op != ReduceOp::kMax;
  for (std::size_t i = 0; i < n; ++i) {
    const std::byte* g = got + i * es;
    const std::byte* w = want + i * es;
    if (std::memcmp(g, w, es) == 0) continue;
    if (nan_any_payload && is_nan_elem(w, t) && is_nan_elem(g, t)) continue;
    return ::testing::AssertionFailure()
           << "element " << i << " of " << n << ": got " << hex(g, es) << " want " << hex(w, es);
  }
  return ::testing::AssertionSuccess();
}

// --- inputs --------------------------------------------------------------------------

// Random values with the interesting ones mixed in: for floats, random bit patterns
// (all exponents, subnormals, inf, NaN with payloads), small exact values, and signed
// zeros; for ints, the whole range including the extremes.
inline std::vector<std::byte> random_buffer(DType t, std::size_t n, std::mt19937_64& rng) {
  const std::size_t es = dtype_size(t);
  std::vector<std::byte> v(n * es);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t bits = rng();
    const int kind = static_cast<int>(rng() % 8);
    if (is_floating(t) && kind < 4) {
      // Small values that give exact, overlapping arithmetic and ties after rounding.
      const float f = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 64.0f;
      switch (t) {
        case DType::kFloat32: bits = std::bit_cast<std::uint32_t>(f); break;
        case DType::kFloat64: bits = std::bit_cast<std::uint64_t>(static_cast<double>(f)); break;
        case DType::kFloat16: bits = ref_float_to_half(f); break;
        default: bits = ref_float_to_bf16(f); break;
      }
    } else if (is_floating(t) && kind == 4) {
      bits = (rng() & 1) ? std::uint64_t{0} : ~std::uint64_t{0} << (es * 8 - 1);  // +-0
    }
    std::memcpy(v.data() + i * es, &bits, es);
  }
  return v;
}

inline constexpr DType kAllTypes[] = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                                      DType::kBFloat16, DType::kInt8,    DType::kUInt8,
                                      DType::kInt32,    DType::kInt64};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                       ReduceOp::kMax, ReduceOp::kAvg};
inline constexpr std::size_t kCounts[] = {0, 1, 15, 16, 17, 1000, 4099};

// One element reduced by the kernel under test.
template <typename T>
T reduce1(T a, T b, DType t, ReduceOp op) {
  reduce_into(&a, &b, 1, t, op);
  return a;
}

// One float narrowed by the kernels under test.
inline std::uint16_t to_half(float f) {
  std::uint16_t h;
  float_to_half(&f, &h, 1);
  return h;
}
inline std::uint16_t to_bf16(float f) {
  std::uint16_t h;
  float_to_bfloat16(&f, &h, 1);
  return h;
}

inline bool f32_isnan(float f) { return std::isnan(f); }
inline bool f64_isnan(double d) { return std::isnan(d); }
inline bool f16_isnan(std::uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
inline bool bf16_isnan(std::uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

}  // namespace tributary::testing
