// Reduction kernels against an independent scalar reference written here: every dtype x
// op x call form (reduce_into, reduce_to disjoint and aliased) x count, with guard
// elements around the result and an unaligned variant. reduce_test runs the clone this CPU
// selects; reduce_level{0,3,4}_test run the same file against each level built alone, so
// every clone (the baseline included) is held to the same reference bits.
#include "core/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"

namespace tributary {
namespace {

// reduce_level{0,3,4}_test link a copy of core/reduce.cc built for that level alone; on a
// CPU without the level they skip rather than die of SIGILL.
class CpuLevelEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
#if defined(TRIB_REDUCE_SINGLE_LEVEL)
    __builtin_cpu_init();
    const int level = TRIB_REDUCE_SINGLE_LEVEL;
    if ((level == 4 && !__builtin_cpu_supports("x86-64-v4")) ||
        (level == 3 && !__builtin_cpu_supports("x86-64-v3"))) {
      GTEST_SKIP() << "this CPU cannot run x86-64-v" << level << " code";
    }
    std::printf("kernels: core/reduce.cc built for level %d alone\n", level);
#else
    __builtin_cpu_init();
    std::printf("kernels: multi-versioned; this CPU selects %s\n",
                __builtin_cpu_supports("x86-64-v4")   ? "arch=x86-64-v4"
                : __builtin_cpu_supports("x86-64-v3") ? "arch=x86-64-v3"
                                                      : "default");
#endif
  }
};
[[maybe_unused]] ::testing::Environment* const kCpuLevel =
    ::testing::AddGlobalTestEnvironment(new CpuLevelEnvironment);

// --- reference conversions, written from the IEEE definitions (double arithmetic) ----

float ref_half_to_float(std::uint16_t h) {
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
double rne_units(double x, int unit_exp) { return std::nearbyint(std::ldexp(x, -unit_exp)); }

std::uint16_t ref_float_to_half(float f) {
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

float ref_bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::uint16_t ref_float_to_bf16(float f) {
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
float h2f(std::uint16_t h) { return ref_half_to_float(h); }
std::uint16_t f2h(float f) { return ref_float_to_half(f); }
float b2f(std::uint16_t h) { return ref_bf16_to_float(h); }
std::uint16_t f2b(float f) { return ref_float_to_bf16(f); }

template <typename S, typename W>
void ref_reduce_typed(void* out, const void* a, const void* b, std::size_t n, ReduceOp op,
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
void ref_scale_typed(void* data, std::size_t n, int k, Codec<S, W> c) {
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
void with_codec(DType t, F&& f) {
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

void ref_reduce(void* out, const void* a, const void* b, std::size_t n, DType t, ReduceOp op) {
  with_codec(t, [&](auto c) { ref_reduce_typed(out, a, b, n, op, c); });
}
void ref_scale(void* data, std::size_t n, DType t, int k) {
  with_codec(t, [&](auto c) { ref_scale_typed(data, n, k, c); });
}

// --- comparison ----------------------------------------------------------------------

bool is_nan_elem(const std::byte* p, DType t) {
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

std::string hex(const std::byte* p, std::size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s = "0x";
  for (std::size_t i = n; i-- > 0;) {
    s += d[std::to_integer<int>(p[i]) >> 4];
    s += d[std::to_integer<int>(p[i]) & 15];
  }
  return s;
}

// Exact bits, except where IEEE leaves a NaN's payload to the hardware: sum and prod of two
// NaNs (x86 keeps the first source's payload, and the compiler may swap operands). min and
// max choose their NaN by rule, so they compare exactly.
::testing::AssertionResult same_elements(const std::byte* got, const std::byte* want, std::size_t n,
                                         DType t, ReduceOp op) {
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
std::vector<std::byte> random_buffer(DType t, std::size_t n, std::mt19937_64& rng) {
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

const DType kAllTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                           DType::kInt8,    DType::kUInt8,   DType::kInt32,   DType::kInt64};
const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kAvg};
const std::size_t kCounts[] = {0, 1, 15, 16, 17, 1000, 4099};

// --- the sweep -----------------------------------------------------------------------

class ReduceSweep : public ::testing::TestWithParam<std::tuple<DType, ReduceOp>> {};

enum class Form { kInto, kIntoSelf, kToDisjoint, kToOutIsA, kToOutIsB, kToAllSame };
const char* form_name(Form f) {
  switch (f) {
    case Form::kInto: return "reduce_into(dst, src)";
    case Form::kIntoSelf: return "reduce_into(x, x)";
    case Form::kToDisjoint: return "reduce_to(out, a, b)";
    case Form::kToOutIsA: return "reduce_to(a, a, b)";
    case Form::kToOutIsB: return "reduce_to(b, a, b)";
    case Form::kToAllSame: return "reduce_to(x, x, x)";
  }
  return "?";
}

TEST_P(ReduceSweep, MatchesScalarReference) {
  const auto [t, op] = GetParam();
  const std::size_t es = dtype_size(t);
  constexpr std::size_t kGuard = 64;  // elements after the range that must stay untouched
  std::mt19937_64 rng(1234 + static_cast<int>(t) * 10 + static_cast<int>(op));
  for (std::size_t count : kCounts) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // aligned and unaligned
      for (Form form : {Form::kInto, Form::kIntoSelf, Form::kToDisjoint, Form::kToOutIsA,
                        Form::kToOutIsB, Form::kToAllSame}) {
        SCOPED_TRACE(::testing::Message()
                     << form_name(form) << " count=" << count << " offset=" << offset);
        const std::size_t total = offset + count + kGuard;
        auto a = random_buffer(t, total, rng);
        auto b = random_buffer(t, total, rng);
        auto out = random_buffer(t, total, rng);
        std::byte* pa = a.data() + offset * es;
        std::byte* pb = b.data() + offset * es;
        std::byte* po = out.data() + offset * es;

        std::vector<std::byte> want(count * es + 1);
        std::vector<std::byte> before;  // the buffer that receives the result, untouched copy
        std::byte* result = nullptr;
        switch (form) {
          case Form::kInto:
            ref_reduce(want.data(), pa, pb, count, t, op);
            before = a;
            reduce_into(pa, pb, count, t, op);
            result = pa;
            break;
          case Form::kIntoSelf:
            ref_reduce(want.data(), pa, pa, count, t, op);
            before = a;
            reduce_into(pa, pa, count, t, op);
            result = pa;
            break;
          case Form::kToDisjoint:
            ref_reduce(want.data(), pa, pb, count, t, op);
            before = out;
            reduce_to(po, pa, pb, count, t, op);
            result = po;
            break;
          case Form::kToOutIsA:
            ref_reduce(want.data(), pa, pb, count, t, op);
            before = a;
            reduce_to(pa, pa, pb, count, t, op);
            result = pa;
            break;
          case Form::kToOutIsB:
            ref_reduce(want.data(), pa, pb, count, t, op);
            before = b;
            reduce_to(pb, pa, pb, count, t, op);
            result = pb;
            break;
          case Form::kToAllSame:
            ref_reduce(want.data(), pa, pa, count, t, op);
            before = a;
            reduce_to(pa, pa, pa, count, t, op);
            result = pa;
            break;
        }
        ASSERT_TRUE(same_elements(result, want.data(), count, t, op));
        // Nothing outside [offset, offset + count) of the destination changed.
        const std::byte* base = result - offset * es;
        ASSERT_EQ(std::memcmp(base, before.data(), offset * es), 0) << "wrote before the range";
        ASSERT_EQ(
            std::memcmp(result + count * es, before.data() + (offset + count) * es, kGuard * es), 0)
            << "wrote past the range";
      }
    }
  }
}

std::string sweep_name(const ::testing::TestParamInfo<ReduceSweep::ParamType>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" +
         std::string(to_string(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAllOps, ReduceSweep,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes),
                                            ::testing::ValuesIn(kAllOps)),
                         sweep_name);

class AvgSweep : public ::testing::TestWithParam<DType> {};

TEST_P(AvgSweep, IsSumThenScaleByCount) {
  const DType t = GetParam();
  const std::size_t es = dtype_size(t);
  std::mt19937_64 rng(99 + static_cast<int>(t));
  for (std::size_t count : kCounts) {
    for (int contributors : {1, 2, 3, 7}) {
      SCOPED_TRACE(::testing::Message() << "count=" << count << " contributors=" << contributors);
      auto a = random_buffer(t, count, rng);
      auto b = random_buffer(t, count, rng);
      std::vector<std::byte> want(count * es + 1);
      ref_reduce(want.data(), a.data(), b.data(), count, t, ReduceOp::kSum);
      ref_scale(want.data(), count, t, contributors);
      reduce_into(a.data(), b.data(), count, t, ReduceOp::kAvg);
      scale_by_count(a.data(), count, t, contributors);
      ASSERT_TRUE(same_elements(a.data(), want.data(), count, t, ReduceOp::kSum));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, AvgSweep, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(to_string(info.param));
                         });

// --- targeted semantics ----------------------------------------------------------------

template <typename T>
T reduce1(T a, T b, DType t, ReduceOp op) {
  reduce_into(&a, &b, 1, t, op);
  return a;
}

TEST(ReduceInt, SumWrapsAround) {
  EXPECT_EQ(reduce1<std::int8_t>(127, 1, DType::kInt8, ReduceOp::kSum), -128);
  EXPECT_EQ(reduce1<std::int8_t>(-128, -1, DType::kInt8, ReduceOp::kSum), 127);
  EXPECT_EQ(reduce1<std::uint8_t>(255, 1, DType::kUInt8, ReduceOp::kSum), 0);
  EXPECT_EQ(reduce1<std::int32_t>(INT32_MAX, 1, DType::kInt32, ReduceOp::kSum), INT32_MIN);
  EXPECT_EQ(reduce1<std::int64_t>(INT64_MAX, 1, DType::kInt64, ReduceOp::kSum), INT64_MIN);
  EXPECT_EQ(reduce1<std::int64_t>(INT64_MIN, -1, DType::kInt64, ReduceOp::kAvg), INT64_MAX);
}

TEST(ReduceInt, ProdWrapsAround) {
  EXPECT_EQ(reduce1<std::int8_t>(16, 16, DType::kInt8, ReduceOp::kProd), 0);
  EXPECT_EQ(reduce1<std::int8_t>(-128, -1, DType::kInt8, ReduceOp::kProd), -128);
  EXPECT_EQ(reduce1<std::int8_t>(100, 3, DType::kInt8, ReduceOp::kProd), 44);    // 300 - 256
  EXPECT_EQ(reduce1<std::uint8_t>(16, 17, DType::kUInt8, ReduceOp::kProd), 16);  // 272 - 256
  EXPECT_EQ(reduce1<std::int32_t>(65536, 65536, DType::kInt32, ReduceOp::kProd), 0);
  EXPECT_EQ(reduce1<std::int32_t>(INT32_MIN, -1, DType::kInt32, ReduceOp::kProd), INT32_MIN);
  EXPECT_EQ(reduce1<std::int64_t>(INT64_MIN, -1, DType::kInt64, ReduceOp::kProd), INT64_MIN);
  EXPECT_EQ(reduce1<std::int64_t>(std::int64_t{1} << 32, std::int64_t{1} << 32, DType::kInt64,
                                  ReduceOp::kProd),
            0);
}

TEST(ReduceInt, WrapAroundAcrossAVectorWidth) {
  // Long enough that the vector body, not only the scalar tail, does the wrapping.
  std::vector<std::int8_t> a(1000, 120), b(1000, 10);
  reduce_into(a.data(), b.data(), a.size(), DType::kInt8, ReduceOp::kSum);
  for (auto v : a) ASSERT_EQ(v, -126);
  std::vector<std::uint8_t> c(1000, 200), d(1000, 2);
  reduce_into(c.data(), d.data(), c.size(), DType::kUInt8, ReduceOp::kProd);
  for (auto v : c) ASSERT_EQ(v, 144);
}

// min/max of a NaN and a number is NaN whichever side the NaN is on, in every form.
template <typename T>
void expect_nan_minmax(DType t, T nan, T one, bool (*isnan_fn)(T)) {
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    SCOPED_TRACE(std::string(to_string(t)) + " " + std::string(to_string(op)));
    std::vector<T> a(33, one), b(33, one);
    a[3] = nan;   // NaN on the left
    b[20] = nan;  // NaN on the right
    b[32] = nan;  // in the scalar tail of a 32-wide body
    std::vector<T> out(33);
    reduce_to(out.data(), a.data(), b.data(), out.size(), t, op);
    std::vector<T> into = a;
    reduce_into(into.data(), b.data(), into.size(), t, op);
    std::vector<T> swapped = b;
    reduce_into(swapped.data(), a.data(), swapped.size(), t, op);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const bool want_nan = i == 3 || i == 20 || i == 32;
      EXPECT_EQ(isnan_fn(out[i]), want_nan) << i;
      EXPECT_EQ(isnan_fn(into[i]), want_nan) << i;
      EXPECT_EQ(isnan_fn(swapped[i]), want_nan) << i;
      EXPECT_EQ(std::memcmp(&into[i], &swapped[i], sizeof(T)), 0) << "order-dependent at " << i;
    }
  }
}

bool f32_isnan(float f) { return std::isnan(f); }
bool f64_isnan(double d) { return std::isnan(d); }
bool f16_isnan(std::uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
bool bf16_isnan(std::uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

TEST(ReduceFloat, MinMaxPropagateNaNInBothOperandOrders) {
  expect_nan_minmax<float>(DType::kFloat32, NAN, 1.0f, f32_isnan);
  expect_nan_minmax<float>(DType::kFloat32, -NAN, -1.0f, f32_isnan);
  expect_nan_minmax<double>(DType::kFloat64, NAN, 1.0, f64_isnan);
  expect_nan_minmax<std::uint16_t>(DType::kFloat16, 0x7e00, 0x3c00, f16_isnan);
  expect_nan_minmax<std::uint16_t>(DType::kFloat16, 0x7c01, 0x3c00, f16_isnan);  // signalling
  expect_nan_minmax<std::uint16_t>(DType::kBFloat16, 0x7fc0, 0x3f80, bf16_isnan);
  expect_nan_minmax<std::uint16_t>(DType::kBFloat16, 0xff81, 0x3f80, bf16_isnan);
}

TEST(ReduceFloat, MinMaxAreCommutativeToTheBit) {
  // -0 < +0, and any NaN gives the default quiet NaN, so aliased forms (which swap
  // operands) and any reduction tree agree.
  const float pz = 0.0f, nz = -0.0f;
  for (auto [x, y] : {std::pair{pz, nz}, std::pair{nz, pz}}) {
    EXPECT_TRUE(std::signbit(reduce1(x, y, DType::kFloat32, ReduceOp::kMin)));
    EXPECT_FALSE(std::signbit(reduce1(x, y, DType::kFloat32, ReduceOp::kMax)));
  }
  const float n1 = std::bit_cast<float>(0x7fc00001u), n2 = std::bit_cast<float>(0x7fc00002u);
  const float neg_nan = std::bit_cast<float>(0xffc00003u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(reduce1(n1, n2, DType::kFloat32, ReduceOp::kMin)),
            0x7fc00000u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(reduce1(n2, n1, DType::kFloat32, ReduceOp::kMax)),
            0x7fc00000u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(reduce1(neg_nan, 1.0f, DType::kFloat32, ReduceOp::kMin)),
            0x7fc00000u);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(reduce1(1.0, -NAN * 1.0, DType::kFloat64, ReduceOp::kMax)),
            0x7ff8000000000000u);
  EXPECT_EQ(reduce1<std::uint16_t>(0xfc01, 0x3c00, DType::kFloat16, ReduceOp::kMin), 0x7e00);
  EXPECT_EQ(reduce1<std::uint16_t>(0x3f80, 0xff81, DType::kBFloat16, ReduceOp::kMax), 0x7fc0);
  const std::uint16_t hpz = 0x0000, hnz = 0x8000;
  EXPECT_EQ(reduce1(hpz, hnz, DType::kFloat16, ReduceOp::kMin), 0x8000);
  EXPECT_EQ(reduce1(hnz, hpz, DType::kBFloat16, ReduceOp::kMax), 0x0000);
}

// --- 16-bit float conversions -------------------------------------------------------------

std::uint16_t to_half(float f) {
  std::uint16_t h;
  float_to_half(&f, &h, 1);
  return h;
}
std::uint16_t to_bf16(float f) {
  std::uint16_t h;
  float_to_bfloat16(&f, &h, 1);
  return h;
}
float bits(std::uint32_t u) { return std::bit_cast<float>(u); }

TEST(Float16, RoundsToNearestEvenAtTies) {
  EXPECT_EQ(to_half(1.0f + 0x1p-11f), 0x3c00);             // tie, 1.0 is even
  EXPECT_EQ(to_half(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie, rounds up to even
  EXPECT_EQ(to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // just past the tie
  EXPECT_EQ(to_half(2049.0f), 0x6800);                     // 2048|2050 tie -> 2048
  EXPECT_EQ(to_half(2051.0f), 0x6802);                     // 2050|2052 tie -> 2052
  EXPECT_EQ(to_half(65504.0f), 0x7bff);                    // largest finite
  EXPECT_EQ(to_half(65519.996f), 0x7bff);                  // below the overflow tie
  EXPECT_EQ(to_half(65520.0f), 0x7c00);                    // the tie rounds to even: inf
  EXPECT_EQ(to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(to_half(1e10f), 0x7c00);
}

TEST(Float16, SubnormalsInfNaN) {
  EXPECT_EQ(to_half(0x1p-24f), 0x0001);    // smallest subnormal
  EXPECT_EQ(to_half(0x1p-25f), 0x0000);    // tie with 0: even
  EXPECT_EQ(to_half(0x1.8p-24f), 0x0002);  // 1.5 units: tie -> 2
  EXPECT_EQ(to_half(0x1.4p-24f), 0x0001);
  EXPECT_EQ(to_half(-0x1p-25f - 0x1p-40f), 0x8001);  // past the tie, negative
  EXPECT_EQ(to_half(0x1p-14f), 0x0400);              // smallest normal
  EXPECT_EQ(to_half(0x1p-14f - 0x1p-25f), 0x0400);   // 1023.5 units: tie -> 1024 (even)
  EXPECT_EQ(to_half(0x3ffp-24f), 0x03ff);            // largest subnormal
  EXPECT_EQ(to_half(bits(0x00000001u)), 0x0000);     // float subnormal
  EXPECT_EQ(to_half(-0.0f), 0x8000);
  EXPECT_EQ(to_half(INFINITY), 0x7c00);
  EXPECT_EQ(to_half(-INFINITY), 0xfc00);
  EXPECT_EQ(to_half(bits(0x7fc00000u)), 0x7e00);
  EXPECT_EQ(to_half(bits(0x7f800001u)), 0x7e00);  // signalling, low payload: quiet NaN
  EXPECT_EQ(to_half(bits(0xff802000u)), 0xfe01);  // sign and payload top kept, quieted
  float f[4];
  const std::uint16_t h[4] = {0x0001, 0x83ff, 0x7c00, 0x7d00};
  half_to_float(h, f, 4);
  EXPECT_EQ(f[0], 0x1p-24f);
  EXPECT_EQ(f[1], -0x3ffp-24f);
  EXPECT_EQ(f[2], INFINITY);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(f[3]), 0x7fe00000u);  // signalling NaN comes back quiet
}

TEST(Float16, AllHalvesWidenExactlyAndRoundTrip) {
  std::vector<std::uint16_t> h(65536);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint16_t>(i);
  std::vector<float> f(h.size());
  half_to_float(h.data(), f.data(), h.size());
  std::vector<std::uint16_t> back(h.size());
  float_to_half(f.data(), back.data(), f.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f[i]),
              std::bit_cast<std::uint32_t>(ref_half_to_float(h[i])))
        << "half 0x" << std::hex << i;
    const std::uint16_t want = f16_isnan(h[i]) ? (h[i] | 0x0200) : h[i];
    ASSERT_EQ(back[i], want) << "half 0x" << std::hex << i;
  }
}

TEST(Float16, RandomFloatsNarrowLikeTheReference) {
  std::mt19937 rng(7);
  std::vector<float> f(1 << 20);
  for (auto& x : f) {
    std::uint32_t u = rng();
    // Concentrate on the half range (exponents 100..150) half of the time.
    if (u & 1) u = (u & 0x807fffffu) | ((100u + (u >> 1) % 50) << 23);
    x = bits(u);
  }
  std::vector<std::uint16_t> h(f.size());
  float_to_half(f.data(), h.data(), f.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(h[i], ref_float_to_half(f[i]))
        << "float 0x" << std::hex << std::bit_cast<std::uint32_t>(f[i]);
  }
}

TEST(BFloat16, RoundsToNearestEvenSubnormalsInfNaN) {
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie -> even
  EXPECT_EQ(to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie -> even, up
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(to_bf16(bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(to_bf16(bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(to_bf16(bits(0x7f7f8000u)), 0x7f80);  // tie, odd -> up to inf
  EXPECT_EQ(to_bf16(bits(0x00008000u)), 0x0000);  // subnormal tie -> even 0
  EXPECT_EQ(to_bf16(bits(0x00018000u)), 0x0002);  // subnormal tie -> even up
  EXPECT_EQ(to_bf16(bits(0x007fffffu)), 0x0080);  // largest subnormal -> smallest normal
  EXPECT_EQ(to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(to_bf16(bits(0x7f800001u)), 0x7fc0);  // would round to inf: stays NaN
  EXPECT_EQ(to_bf16(bits(0xffc12345u)), 0xffc1);
  float f;
  const std::uint16_t h = 0x0001;
  bfloat16_to_float(&h, &f, 1);
  EXPECT_EQ(f, 0x1p-133f);
}

TEST(BFloat16, RandomFloatsNarrowLikeTheReference) {
  std::mt19937 rng(8);
  std::vector<float> f(1 << 20);
  for (auto& x : f) x = bits(rng());
  std::vector<std::uint16_t> h(f.size());
  float_to_bfloat16(f.data(), h.data(), f.size());
  std::vector<float> back(f.size());
  bfloat16_to_float(h.data(), back.data(), h.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(h[i], ref_float_to_bf16(f[i]))
        << "float 0x" << std::hex << std::bit_cast<std::uint32_t>(f[i]);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(back[i]), std::uint32_t{h[i]} << 16);
  }
}

TEST(HalfArithmetic, RoundsAfterEveryPairwiseOp) {
  // 2048 + 1 in float16 is a tie and stays 2048; in float32 it would be 2049.
  const std::uint16_t big = to_half(2048.0f), one = to_half(1.0f);
  EXPECT_EQ(reduce1(big, one, DType::kFloat16, ReduceOp::kSum), 0x6800);
  EXPECT_EQ(reduce1(to_half(2050.0f), one, DType::kFloat16, ReduceOp::kSum),
            0x6802);  // 2051: tie -> 2052
  // bfloat16: 256 + 1 is a tie -> 256.
  EXPECT_EQ(reduce1(to_bf16(256.0f), to_bf16(1.0f), DType::kBFloat16, ReduceOp::kSum), 0x4380);
  // Overflow in the narrow type becomes infinity, not a large float32.
  EXPECT_EQ(reduce1(to_half(60000.0f), to_half(10000.0f), DType::kFloat16, ReduceOp::kSum), 0x7c00);
}

// --- scale_by_count -------------------------------------------------------------------

TEST(ScaleByCount, FloatsDivide) {
  std::vector<float> f = {7.0f, -7.0f, 1.0f, 0.0f};
  scale_by_count(f.data(), f.size(), DType::kFloat32, 2);
  EXPECT_EQ(f, (std::vector<float>{3.5f, -3.5f, 0.5f, 0.0f}));
  std::vector<double> d = {1.0, 10.0};
  scale_by_count(d.data(), d.size(), DType::kFloat64, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
  EXPECT_EQ(d[1], 10.0 / 3.0);
  std::uint16_t h[2] = {to_half(3.0f), to_half(0x1p-24f)};
  scale_by_count(h, 2, DType::kFloat16, 2);
  EXPECT_EQ(h[0], to_half(1.5f));
  EXPECT_EQ(h[1], 0x0000);  // half of the smallest subnormal: tie -> 0
  std::uint16_t b = to_bf16(3.0f);
  scale_by_count(&b, 1, DType::kBFloat16, 3);
  EXPECT_EQ(b, 0x3f80);
}

TEST(ScaleByCount, IntegersTruncateTowardZero) {
  std::vector<std::int8_t> i8 = {7, -7, -128, 127, -1};
  scale_by_count(i8.data(), i8.size(), DType::kInt8, 2);
  EXPECT_EQ(i8, (std::vector<std::int8_t>{3, -3, -64, 63, 0}));
  std::vector<std::uint8_t> u8 = {255, 1, 5};
  scale_by_count(u8.data(), u8.size(), DType::kUInt8, 2);
  EXPECT_EQ(u8, (std::vector<std::uint8_t>{127, 0, 2}));
  std::vector<std::int32_t> i32 = {INT32_MIN, INT32_MAX, -5, 5};
  scale_by_count(i32.data(), i32.size(), DType::kInt32, 3);
  EXPECT_EQ(i32, (std::vector<std::int32_t>{INT32_MIN / 3, INT32_MAX / 3, -1, 1}));
  std::vector<std::int64_t> i64 = {INT64_MIN, -10, 10};
  scale_by_count(i64.data(), i64.size(), DType::kInt64, 4);
  EXPECT_EQ(i64, (std::vector<std::int64_t>{INT64_MIN / 4, -2, 2}));
}

TEST(ScaleByCount, OneContributorAndEmptyAreNoOps) {
  std::vector<std::int32_t> v = {-7, 7};
  scale_by_count(v.data(), v.size(), DType::kInt32, 1);
  EXPECT_EQ(v, (std::vector<std::int32_t>{-7, 7}));
  scale_by_count(nullptr, 0, DType::kFloat32, 5);
}

TEST(ScaleByCountDeathTest, ZeroContributorsIsABug) {
  float f = 1.0f;
  EXPECT_DEATH(scale_by_count(&f, 1, DType::kFloat32, 0), "contributors");
}

}  // namespace
}  // namespace tributary
