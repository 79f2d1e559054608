// Fuzz-style: truncations, bit flips and random bytes must never crash a decoder; every
// failure is kBadFrame and leaves an accumulation buffer untouched.
#include <cstring>
#include <random>

#include "test_util.h"

namespace tributary::compression {
namespace {

using testing::encode;
using testing::gaussian;
using testing::must_make;

const char* kSpecs[] = {
    "float32",           "float16",          "bfloat16",
    "qint8:bucket=16",   "qint4:bucket=16",  "sign:bucket=16",
    "topk:density=0.05", "topk:density=0.6", "qint4:bucket=64,zstd,zstd_min_gain=0"};

void expect_rejected_or_ok(std::span<const std::byte> payload, std::size_t count) {
  std::vector<float> acc(count, 1.5f);
  const Status s = decode_accumulate_payload(payload, acc.data(), count);
  if (!s.is_ok()) {
    ASSERT_EQ(s.code(), StatusCode::kBadFrame) << s.to_string();
    ASSERT_FALSE(s.message().empty());
    for (float v : acc) ASSERT_EQ(v, 1.5f) << "a rejected payload wrote: " << s.to_string();
  }
  std::vector<float> out(count);
  const Status d = decode_payload(payload, out.data(), count);
  ASSERT_EQ(d.is_ok(), s.is_ok());
}

TEST(Garbage, EveryTruncationIsRejected) {
  for (const char* spec : kSpecs) {
    auto codec = must_make(spec);
    const std::size_t n = 77;
    const auto payload = encode(*codec, gaussian(n, 51), {.seed = 1});
    for (std::size_t len = 0; len < payload.size(); ++len) {
      std::vector<float> out(n);
      const Status s = decode_payload(std::span(payload).first(len), out.data(), n);
      ASSERT_EQ(s.code(), StatusCode::kBadFrame) << spec << " len=" << len;
    }
    auto longer = payload;
    longer.push_back(std::byte{0});
    std::vector<float> out(n);
    EXPECT_EQ(decode_payload(longer, out.data(), n).code(), StatusCode::kBadFrame) << spec;
  }
}

TEST(Garbage, BitFlipsNeverCrash) {
  std::mt19937 gen(52);
  for (const char* spec : kSpecs) {
    auto codec = must_make(spec);
    const std::size_t n = 77;
    const auto payload = encode(*codec, gaussian(n, 53), {.seed = 1});
    for (std::size_t i = 0; i < payload.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        auto bad = payload;
        bad[i] ^= static_cast<std::byte>(1u << bit);
        expect_rejected_or_ok(bad, n);
      }
    }
    for (int t = 0; t < 300; ++t) {  // several random byte overwrites at once
      auto bad = payload;
      for (int k = 0; k < 4; ++k) bad[gen() % bad.size()] = static_cast<std::byte>(gen());
      expect_rejected_or_ok(bad, n);
    }
  }
}

TEST(Garbage, RandomBytesBehindAValidHeaderNeverCrash) {
  std::mt19937 gen(54);
  for (int t = 0; t < 20000; ++t) {
    const std::size_t count = gen() % 64;
    std::vector<std::byte> p(gen() % 200);
    for (auto& b : p) b = static_cast<std::byte>(gen());
    if (p.size() >= 16) {
      p[0] = std::byte{0x54};
      p[1] = std::byte{0x43};
      p[2] = static_cast<std::byte>(1 + gen() % kMaxCodecId);
      p[3] = std::byte{1};
      const std::uint32_t c = static_cast<std::uint32_t>(count);
      std::memcpy(p.data() + 4, &c, 4);
      if (gen() % 2) {  // plausible small params half of the time
        const std::uint32_t param = gen() % 40, flags = gen() % 8;
        std::memcpy(p.data() + 8, &param, 4);
        std::memcpy(p.data() + 12, &flags, 4);
      }
    }
    expect_rejected_or_ok(p, count);
  }
}

TEST(Garbage, HostileHeadersAreNamed) {
  std::vector<float> out(8);
  std::vector<std::byte> p(16, std::byte{0});
  EXPECT_NE(decode_payload(p, out.data(), 8).message().find("magic"), std::string::npos);
  p[0] = std::byte{0x54};
  p[1] = std::byte{0x43};
  p[2] = std::byte{99};
  EXPECT_NE(decode_payload(p, out.data(), 8).message().find("codec id"), std::string::npos);
  // A zstd stage claiming a 4 GB inner payload for 8 elements is refused before zstd runs.
  p[2] = static_cast<std::byte>(CodecId::kZstd);
  p[3] = std::byte{1};
  p[4] = std::byte{8};
  p[8] = p[9] = p[10] = p[11] = std::byte{0xff};
  EXPECT_NE(decode_payload(p, out.data(), 8).message().find("inner length"), std::string::npos);
  // A non-finite scale.
  auto q = encode(*must_make("qint8:bucket=8"), gaussian(8, 55));
  const float inf = INFINITY;
  std::memcpy(q.data() + 16, &inf, 4);
  EXPECT_NE(decode_payload(q, out.data(), 8).message().find("scale"), std::string::npos);
}

}  // namespace
}  // namespace tributary::compression
