// Top-k: selection quality, index format choice, warm-up, momentum correction.
#include <algorithm>
#include <cmath>

#include "compression/error_feedback.h"
#include "test_util.h"

namespace tributary::compression {
namespace {

using testing::decode;
using testing::encode;
using testing::gaussian;
using testing::must_make;

struct Picked {
  std::size_t nnz = 0;
  float min_sent = INFINITY;
  float max_unsent = 0;
};

Picked inspect(std::span<const float> x, std::span<const float> y) {
  Picked p;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (y[i] != 0.0f) {
      ++p.nnz;
      p.min_sent = std::min(p.min_sent, std::fabs(x[i]));
    } else {
      p.max_unsent = std::max(p.max_unsent, std::fabs(x[i]));
    }
  }
  return p;
}

TEST(TopK, PicksAboutKOfTheLargest) {
  for (double density : {0.001, 0.01, 0.1}) {
    auto codec = must_make("topk:density=" + std::to_string(density) + ",warmup=0");
    const std::size_t n = 200000;
    const auto x = gaussian(n, 21);
    const auto payload = encode(*codec, x, {.seed = 5});
    const auto y = decode(payload, n);
    const Picked p = inspect(x, y);
    const double k = density * n;
    EXPECT_GE(p.nnz, k / 1.5) << density;
    EXPECT_LE(p.nnz, k * 1.5) << density;
    EXPECT_GE(p.min_sent, p.max_unsent) << "a threshold cut: nothing larger is left behind";
    EXPECT_EQ(read_header(payload)->param, p.nnz);
  }
}

TEST(TopK, SmallTensorsAreExact) {
  auto codec = must_make("topk:density=0.01,warmup=0");
  const auto x = gaussian(1000, 22);
  const Picked p = inspect(x, decode(encode(*codec, x), 1000));
  EXPECT_EQ(p.nnz, 10u);
  EXPECT_GT(p.min_sent, p.max_unsent);
}

TEST(TopK, TiesAreCutToK) {
  auto codec = must_make("topk:density=0.01,warmup=0");
  std::vector<float> x(100000, 1.0f);
  const Picked p = inspect(x, decode(encode(*codec, x), x.size()));
  EXPECT_EQ(p.nnz, 1000u);
}

TEST(TopK, ZerosAreNeverSent) {
  auto codec = must_make("topk:density=0.5");
  std::vector<float> x(1000, 0.0f);
  x[10] = 2.0f;
  const auto payload = encode(*codec, x);
  EXPECT_EQ(read_header(payload)->param, 1u);
  EXPECT_EQ(decode(payload, 1000), x);
  EXPECT_EQ(read_header(encode(*codec, std::vector<float>(1000, 0.0f)))->param, 0u);
}

TEST(TopK, PicksTheSmallerIndexFormat) {
  const std::size_t n = 100000;
  const auto x = gaussian(n, 23);
  // 1%: ~1000 indices with gaps ~100 -> 1-2 varint bytes each, far below n/8 = 12500.
  const auto sparse = encode(*must_make("topk:density=0.01,warmup=0"), x);
  EXPECT_EQ(read_header(sparse)->flags & 4u, 0u) << "varint";
  // 30%: gaps ~3 -> ~1 byte per index (30000) > bitmap (12500).
  const auto dense = encode(*must_make("topk:density=0.3,warmup=0"), x);
  EXPECT_EQ(read_header(dense)->flags & 4u, 4u) << "bitmap";
  // Both decode to their own selection.
  EXPECT_EQ(inspect(x, decode(dense, n)).nnz, read_header(dense)->param);
}

TEST(TopK, ValuesInFloat16) {
  auto codec = must_make("topk:density=0.05,warmup=0,values=f16");
  const auto x = gaussian(5000, 24);
  const auto payload = encode(*codec, x);
  EXPECT_EQ(read_header(payload)->flags & 3u, 1u);
  const auto y = decode(payload, 5000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (y[i] != 0) {
      ASSERT_NEAR(y[i], x[i], std::fabs(x[i]) * 0x1p-11);
    }
  }
}

TEST(TopK, WarmupScheduleDividesByFourPerStage) {
  auto c = parse_codec_spec("topk:density=0.001,warmup=10");
  ASSERT_TRUE(c.is_ok());
  EXPECT_DOUBLE_EQ(topk_density_at(*c, 0), 0.25);
  EXPECT_DOUBLE_EQ(topk_density_at(*c, 9), 0.25);
  EXPECT_DOUBLE_EQ(topk_density_at(*c, 10), 0.0625);
  EXPECT_DOUBLE_EQ(topk_density_at(*c, 25), 0.015625);
  EXPECT_DOUBLE_EQ(topk_density_at(*c, 40), 0.001);
  EXPECT_DOUBLE_EQ(topk_density_at(*c, 1000000), 0.001);
  auto codec = must_make("topk:density=0.001,warmup=10");
  const auto x = gaussian(40000, 25);
  const auto nnz0 = read_header(encode(*codec, x, {.step = 0}))->param;
  const auto nnz50 = read_header(encode(*codec, x, {.step = 50}))->param;
  EXPECT_NEAR(nnz0, 10000, 2000);
  EXPECT_NEAR(nnz50, 40, 20);
  EXPECT_GE(codec->max_encoded_bytes(40000), 16 + 4 + 5000 + 2 * 15000u);
}

TEST(TopK, ErrorFeedbackKeepsEverythingNotSent) {
  auto codec = must_make("topk:density=0.01,warmup=0");
  const auto x = gaussian(10000, 26);
  std::vector<float> r(10000, 0.0f);
  const auto y = decode(encode(*codec, x, {.residual = r}), 10000);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i] + r[i], x[i]) << i;
}

TEST(TopK, MomentumCorrectionAccumulatesVelocityAndMasksIt) {
  auto codec = must_make("topk:density=0.01,warmup=0,momentum=0.9");
  ASSERT_TRUE(codec->wants_momentum());
  const std::size_t n = 10000;
  ErrorFeedback ef;
  auto x = gaussian(n, 27);
  std::vector<float> u_expect(n, 0.0f), v_expect(n, 0.0f);
  for (int step = 0; step < 3; ++step) {
    EncodeOptions o{.step = static_cast<std::uint64_t>(step)};
    o.residual = ef.residual(7, n);
    o.momentum = ef.momentum(7, n);
    const auto y = decode(encode(*codec, x, o), n);
    for (std::size_t i = 0; i < n; ++i) {
      u_expect[i] = 0.9f * u_expect[i] + x[i];
      v_expect[i] += u_expect[i];
      if (y[i] != 0.0f) {
        ASSERT_EQ(o.momentum[i], 0.0f);
        u_expect[i] = 0.0f;
        ASSERT_EQ(y[i] + o.residual[i], v_expect[i]);
        v_expect[i] = o.residual[i];
      } else {
        ASSERT_EQ(o.momentum[i], u_expect[i]);
        ASSERT_EQ(o.residual[i], v_expect[i]);
      }
    }
  }
  std::vector<std::byte> out(codec->max_encoded_bytes(n));
  std::vector<float> m(n);
  EXPECT_EQ(codec->encode(x.data(), DType::kFloat32, n, out, {.momentum = m}).status().code(),
            StatusCode::kInvalidArgument)
      << "momentum without a residual";
}

}  // namespace
}  // namespace tributary::compression
