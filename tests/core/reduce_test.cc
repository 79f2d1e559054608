// Reduction kernels against an independent scalar reference (reduce_reference.h): every
// dtype x op x call form (reduce_into, reduce_to disjoint and aliased) x count, with guard
// elements around the result and an unaligned variant; integer wrap-around, NaN and signed
// zero rules; scale_by_count. reduce_test runs the clone this CPU selects;
// reduce_level{0,3,4}_test run the same files against each level built alone, so every
// clone (the baseline included) is held to the same reference bits.
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
#include "tests/core/reduce_reference.h"

namespace tributary::testing {
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
}  // namespace tributary::testing
