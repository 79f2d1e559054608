// Wire format pinned byte for byte, one payload per codec, for the GPU port and for any
// future change: if one of these fails, the wire format changed (bump kPayloadVersion and
// docs/compression.md), an encoder now writes other valid bytes on purpose (re-pin them
// and say so in docs/compression.md, as sign's RMS scale did), or the change is a bug.
#include "compression/counter_rng.h"
#include "core/hash.h"
#include "test_util.h"

namespace tributary::compression {
namespace {

// 16 inputs exercising signs, zero, a tie and a bucket boundary (bucket 8).
const std::vector<float> kInput = {0.5f, -1.25f, 3.0f,  0.0f,  -0.75f, 2.0f,  -3.5f, 0.125f,
                                   1.0f, -0.5f,  0.25f, -2.0f, 4.0f,   -4.0f, 0.0f,  1.5f};
const EncodeOptions kOptions{.seed = 1234, .stream = 5, .step = 6, .rank = 7, .element_offset = 8};

#if defined(TRIB_COMPRESSION_SINGLE_LEVEL)
#define SKIP_IF_LEVEL_UNSUPPORTED()                                                     \
  do {                                                                                  \
    __builtin_cpu_init();                                                               \
    if ((TRIB_COMPRESSION_SINGLE_LEVEL == 4 && !__builtin_cpu_supports("x86-64-v4")) || \
        (TRIB_COMPRESSION_SINGLE_LEVEL == 3 && !__builtin_cpu_supports("x86-64-v3"))) { \
      GTEST_SKIP() << "this CPU cannot run this level's code";                          \
    }                                                                                   \
  } while (0)
#else
#define SKIP_IF_LEVEL_UNSUPPORTED() \
  do {                              \
  } while (0)
#endif

std::uint64_t fnv1a(std::span<const std::byte> b) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte x : b) h = (h ^ std::to_integer<std::uint64_t>(x)) * 0x100000001b3ull;
  return h;
}

std::string golden(const std::string& spec) {
  return to_hex(testing::encode(*testing::must_make(spec), kInput, kOptions));
}

TEST(Golden, CounterRng) {
  SKIP_IF_LEVEL_UNSUPPORTED();
  const RngKey k = rng_key(1234, 5, 6, 7);
  EXPECT_EQ(k.k0, 1433432235u);
  EXPECT_EQ(k.k1, 3310679815u);
  EXPECT_EQ(rng_bits(k, std::uint64_t{0}), 1687968108u);
  EXPECT_EQ(rng_bits(k, (std::uint64_t{1} << 32) + 9), 17560797u);
}

TEST(Golden, Payloads) {
  SKIP_IF_LEVEL_UNSUPPORTED();
  EXPECT_EQ(golden("float32"),
            "544301011000000000000000000000000000003f0000a0bf0000404000000000000040bf00000040000060"
            "c00000003e0000803f000000bf0000803e000000c000008040000080c0000000000000c03f");
  EXPECT_EQ(golden("float16"),
            "54430201100000000000000000000000003800bd0042000000ba004000c30030003c00b8003400c0004400"
            "c40000003e");
  EXPECT_EQ(golden("bfloat16"),
            "54430301100000000000000000000000003fa0bf4040000040bf004060c0003e803f00bf803e00c0804080"
            "c00000c03f");
  EXPECT_EQ(golden("qint8:bucket=8"),
            "5443040110000000080000000100000087c3e13c0402013d12d36d00e449810520f108c17f810030");
  EXPECT_EQ(golden("qint8:bucket=8,stochastic=0"),
            "5443040110000000080000000000000087c3e13c0402013d12d36d00e549810520f008c07f810030");
  EXPECT_EQ(golden("qint4:bucket=8"),
            "544305011000000008000000010000000000003f2549123f698ec6818a591fb8");
  EXPECT_EQ(golden("sign:bucket=8"), "54430701100000000800000000000000a3eced3fd6520e40522a");
  // 4 of 16: the bitmap (2 bytes, padded to 4) beats varint (4 bytes).
  EXPECT_EQ(golden("topk:density=0.25,warmup=0"),
            "5443060110000000040000000400000002000000443000004040"
            "60c0804080c0");
  EXPECT_EQ(golden("topk:density=1,warmup=0,values=f16"),
            "54430601100000000e0000000500000002000000f7bf0000"
            "003800bd004200ba004000c30030003c00b8003400c0004400c4003e");
  EXPECT_EQ(golden("qint8:bucket=8,zstd,zstd_min_gain=0.5"),
            "544308011000000028000000000000005443040110000000080000000100000087c3e13c0402013d12d36d"
            "00e449810520f108c17f810030");
}

TEST(Golden, TopKVarintIndices) {
  SKIP_IF_LEVEL_UNSUPPORTED();
  // 5 of 100: varint deltas 3, 36, 0, 48, 8 (5 bytes) beat the 13-byte bitmap.
  std::vector<float> x(100, 0.0f);
  x[3] = 1.0f;
  x[40] = -2.0f;
  x[41] = 3.0f;
  x[90] = -0.5f;
  x[99] = 1e-3f;
  EXPECT_EQ(to_hex(testing::encode(*testing::must_make("topk:density=0.05,warmup=0"), x, kOptions)),
            "544306016400000005000000000000000500000003240030080000"
            "00803f00c0404000bf833a");
}

// Long payloads run the vector bodies of every kernel (the 16-element goldens mostly run
// their scalar tails); their digests must not depend on the CPU level.
TEST(Golden, LongPayloadDigestsAreTheSameOnEveryLevel) {
  SKIP_IF_LEVEL_UNSUPPORTED();
  const std::size_t n = 10007;
  std::vector<float> x(n);
  const RngKey k = rng_key(99, 0, 0, 0);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = (rng_uniform(rng_bits(k, std::uint64_t{i})) - 0.5f) * static_cast<float>(1 + i % 13);
  }
  const std::pair<const char*, std::uint64_t> cases[] = {
      {"float16", 4436319684029962288ull},
      {"bfloat16", 3853132419517103468ull},
      {"qint8:bucket=512", 14734565337967014173ull},
      {"qint8:bucket=512,stochastic=0", 9961980428455847740ull},
      {"qint4:bucket=512", 17028847929594523272ull},
      {"sign:bucket=512", 10274182492238731689ull},
      {"topk:density=0.01,warmup=0", 390282655398170438ull},
  };
  for (const auto& [spec, digest] : cases) {
    auto codec = testing::must_make(spec);
    std::vector<float> r(n, 0.25f);
    const auto payload = testing::encode(*codec, x, {.seed = 1, .residual = r});
    std::vector<float> acc(n, 1.0f);
    ASSERT_TRUE(codec->decode_accumulate(payload, acc.data(), n).is_ok());
    const std::uint64_t h = fnv1a(payload) ^ (fnv1a(std::as_bytes(std::span(r))) * 3) ^
                            (fnv1a(std::as_bytes(std::span(acc))) * 7);
    EXPECT_EQ(h, digest) << spec;
  }
}

}  // namespace
}  // namespace tributary::compression
