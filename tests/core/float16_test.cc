// The 16-bit float conversions (float16, bfloat16: round to nearest even, subnormals,
// infinities, NaN) against the reference of reduce_reference.h, and arithmetic that rounds
// to the narrow type after every pairwise operation. Built into reduce_test and every
// reduce_level{0,3,4}_test with the reduction sweep.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/reduce.h"
#include "tests/core/reduce_reference.h"

namespace tributary::testing {
namespace {

// --- 16-bit float conversions -------------------------------------------------------------

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

}  // namespace
}  // namespace tributary::testing
