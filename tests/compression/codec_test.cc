// Round trips, error bounds, unbiasedness, error feedback, determinism and the registry,
// swept over codecs and sizes (0, 1, odd, bucket edges, several buckets).
#include <cmath>
#include <cstring>

#include "compression/counter_rng.h"
#include "compression/error_feedback.h"
#include "core/reduce.h"
#include "test_util.h"

namespace tributary::compression {
namespace {

using testing::decode;
using testing::encode;
using testing::gaussian;
using testing::must_make;

const std::size_t kSizes[] = {0, 1, 7, 8, 63, 511, 512, 513, 4099};

// Largest |x| in the bucket holding element i.
float bucket_amax(std::span<const float> x, std::size_t i, std::size_t bucket) {
  const std::size_t b = i / bucket * bucket;
  float m = 0;
  for (std::size_t j = b; j < std::min(x.size(), b + bucket); ++j) m = std::max(m, std::fabs(x[j]));
  return m;
}

TEST(Codec, CastsRoundTripWithinTheirPrecision) {
  for (const char* spec : {"float32", "float16", "bfloat16"}) {
    auto codec = must_make(spec);
    const double tol = std::string(spec) == "float32"   ? 0
                       : std::string(spec) == "float16" ? 0x1p-11
                                                        : 0x1p-8;
    for (std::size_t n : kSizes) {
      const auto x = gaussian(n, 1);
      const auto payload = encode(*codec, x);
      EXPECT_EQ(payload.size(), codec->max_encoded_bytes(n));
      const auto y = decode(payload, n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(y[i] - x[i]), tol * std::fabs(x[i]) + 1e-7) << spec << " n=" << n;
      }
    }
  }
}

TEST(Codec, QuantizersStayWithinOneStep) {
  for (const char* spec : {"qint8:bucket=512", "qint4:bucket=64", "qint8:bucket=8,stochastic=0",
                           "qint4:bucket=512,stochastic=0"}) {
    auto codec = must_make(spec);
    const bool four = codec->id() == CodecId::kQInt4;
    const bool nearest = std::string(spec).find("stochastic=0") != std::string::npos;
    const std::size_t bucket =
        std::stoul(std::string(spec).substr(std::string(spec).find('=') + 1));
    for (std::size_t n : kSizes) {
      const auto x = gaussian(n, 2);
      const auto payload = encode(*codec, x, {.seed = 7});
      EXPECT_EQ(payload.size(), codec->max_encoded_bytes(n));
      const auto y = decode(payload, n);
      for (std::size_t i = 0; i < n; ++i) {
        const float step = bucket_amax(x, i, bucket) / (four ? 7.0f : 127.0f);
        ASSERT_LE(std::fabs(y[i] - x[i]), (nearest ? 0.5f : 1.0f) * step * 1.0001f + 1e-7f)
            << spec << " n=" << n << " i=" << i;
      }
    }
  }
}

// A bucket whose amax is below L / FLT_MAX (~3.7e-37 for qint8, ~2e-38 for qint4) has no
// finite L / amax: it encodes as zeros. No tiny value ever comes back with its sign
// flipped or larger than the bucket's amax.
TEST(Codec, TinyBucketsEncodeAsZeros) {
  std::vector<float> x(1024);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float tiny[] = {1e-40f, -1e-40f, 2e-38f, -3e-37f, 1e-44f, 0.0f};
    x[i] = tiny[i % 6];
  }
  for (const char* spec :
       {"qint8:bucket=512", "qint4:bucket=512", "qint8:bucket=512,stochastic=0"}) {
    auto codec = must_make(spec);
    const auto y = decode(encode(*codec, x, {.seed = 3}), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_FALSE(y[i] * x[i] < 0.0f) << spec << " i=" << i << " x=" << x[i] << " y=" << y[i];
      ASSERT_LE(std::fabs(y[i]), 3e-37f) << spec << " i=" << i;
    }
  }
  // All of a qint8 bucket below the threshold: exact zeros.
  std::vector<float> z(512, -1e-40f);
  z[7] = 2e-38f;
  for (const char* spec : {"qint8:bucket=512", "qint8:bucket=512,stochastic=0"}) {
    const auto y = decode(encode(*must_make(spec), z, {.seed = 3}), z.size());
    for (std::size_t i = 0; i < z.size(); ++i) ASSERT_EQ(y[i], 0.0f) << spec << " i=" << i;
  }
}

TEST(Codec, SignSendsTheBucketRootMeanSquareWithTheSign) {
  auto codec = must_make("sign:bucket=16");
  for (std::size_t n : kSizes) {
    const auto x = gaussian(n, 3);
    const auto y = decode(encode(*codec, x), n);
    for (std::size_t b = 0; b < n; b += 16) {
      const std::size_t e = std::min(n, b + 16);
      double squares = 0;
      for (std::size_t i = b; i < e; ++i) squares += static_cast<double>(x[i]) * x[i];
      const double rms = std::sqrt(squares / static_cast<double>(e - b));
      for (std::size_t i = b; i < e; ++i) {
        ASSERT_NEAR(std::fabs(y[i]), rms, 1e-5);
        ASSERT_EQ(y[i] < 0, x[i] < 0);
      }
    }
  }
}

// Momentum correction: the codec compresses residual + velocity, u = m*u + x, and keeps
// exactly what it did not send; every element is sent, so the velocity is never masked.
TEST(Codec, SignMomentumCorrectionCompressesTheVelocity) {
  auto codec = must_make("sign:bucket=64,momentum=0.9");
  ASSERT_TRUE(codec->wants_momentum());
  EXPECT_FALSE(must_make("sign:momentum=0")->wants_momentum());
  const std::size_t n = 1000;
  ErrorFeedback ef;
  std::vector<float> u_expect(n, 0.0f), v_expect(n, 0.0f);
  for (int step = 0; step < 4; ++step) {
    const auto x = gaussian(n, 40 + static_cast<std::uint32_t>(step));
    EncodeOptions o;
    o.residual = ef.residual(3, n);
    o.momentum = ef.momentum(3, n);
    const auto y = decode(encode(*codec, x, o), n);
    for (std::size_t i = 0; i < n; ++i) {
      u_expect[i] = 0.9f * u_expect[i] + x[i];
      v_expect[i] = v_expect[i] + u_expect[i];
      ASSERT_EQ(o.momentum[i], u_expect[i]) << "step " << step << " i=" << i;
      ASSERT_EQ(y[i] < 0, v_expect[i] < 0);
      ASSERT_EQ(o.residual[i], v_expect[i] - y[i]) << "residual = v - decoded, exactly";
      v_expect[i] = o.residual[i];
    }
  }
  std::vector<std::byte> out(codec->max_encoded_bytes(n));
  std::vector<float> m(n), x(n, 1.0f);
  EXPECT_EQ(codec->encode(x.data(), DType::kFloat32, n, out, {.momentum = m}).status().code(),
            StatusCode::kInvalidArgument)
      << "momentum without a residual";
}

TEST(Codec, StochasticRoundingIsUnbiased) {
  for (const char* spec : {"qint8:bucket=64", "qint4:bucket=64"}) {
    auto codec = must_make(spec);
    const float levels = codec->id() == CodecId::kQInt4 ? 7.0f : 127.0f;
    const auto x = gaussian(64, 4);
    const float step = bucket_amax(x, 0, 64) / levels;
    std::vector<double> mean(64, 0.0);
    const int kTrials = 4000;
    for (int t = 0; t < kTrials; ++t) {
      const auto y =
          decode(encode(*codec, x, {.seed = 1, .step = static_cast<std::uint64_t>(t)}), 64);
      for (int i = 0; i < 64; ++i) mean[i] += y[i];
    }
    // Per element the rounding error is within one step with variance <= step^2/4, so the
    // trial mean is within 6 sigma = 6 * step / (2 sqrt(trials)).
    const double tol = 6.0 * step / (2.0 * std::sqrt(kTrials));
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(mean[i] / kTrials, x[i], tol) << spec << " i=" << i;
  }
}

TEST(Codec, NarrowInputsEncodeLikeTheirFloat32Values) {
  auto codec = must_make("qint8");
  const auto x = gaussian(1000, 5);
  std::vector<std::uint16_t> h(1000), b(1000);
  float_to_half(x.data(), h.data(), 1000);
  float_to_bfloat16(x.data(), b.data(), 1000);
  std::vector<float> hx(1000), bx(1000);
  half_to_float(h.data(), hx.data(), 1000);
  bfloat16_to_float(b.data(), bx.data(), 1000);
  std::vector<std::byte> out(codec->max_encoded_bytes(1000));
  ASSERT_EQ(*codec->encode(h.data(), DType::kFloat16, 1000, out, {}), out.size());
  EXPECT_EQ(out, encode(*codec, hx));
  ASSERT_EQ(*codec->encode(b.data(), DType::kBFloat16, 1000, out, {}), out.size());
  EXPECT_EQ(out, encode(*codec, bx));
}

TEST(Codec, DecodeAccumulateAddsTheDecodedValues) {
  for (const char* spec : {"float32", "float16", "bfloat16", "qint8:bucket=32", "qint4:bucket=32",
                           "sign:bucket=32", "topk:density=0.1", "qint4:bucket=32,zstd"}) {
    auto codec = must_make(spec);
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{333}}) {
      const auto x = gaussian(n, 6);
      const auto payload = encode(*codec, x, {.seed = 3});
      const auto y = decode(payload, n);
      auto acc = gaussian(n, 7);
      auto expect = acc;
      for (std::size_t i = 0; i < n; ++i) expect[i] += y[i];
      ASSERT_TRUE(codec->decode_accumulate(payload, acc.data(), n).is_ok()) << spec;
      EXPECT_EQ(acc, expect) << spec << " n=" << n;
      std::vector<float> direct(n);
      ASSERT_TRUE(codec->decode(payload, direct.data(), n).is_ok());
      EXPECT_EQ(direct, y);
    }
  }
}

// With error feedback, sum(decoded) = sum(inputs) - residual: nothing is lost, only late.
TEST(Codec, ErrorFeedbackMakesTheRunningSumTrackTheInputs) {
  for (const char* spec : {"qint4:bucket=128", "sign:bucket=128", "topk:density=0.02", "float16"}) {
    auto codec = must_make(spec);
    const std::size_t n = 2048;
    ErrorFeedback ef;
    std::vector<double> sum_in(n, 0), sum_out(n, 0);
    for (int step = 0; step < 100; ++step) {
      // A biased gradient (constant mean) so that a codec without feedback drifts.
      auto x = gaussian(n, 100 + step, 0.1f);
      for (std::size_t i = 0; i < n; ++i) x[i] += 0.01f * static_cast<float>(i % 7);
      EncodeOptions o{.seed = 9, .step = static_cast<std::uint64_t>(step)};
      o.residual = ef.residual(1, n);
      const auto y = decode(encode(*codec, x, o), n);
      for (std::size_t i = 0; i < n; ++i) {
        sum_in[i] += x[i];
        sum_out[i] += y[i];
      }
    }
    const auto r = ef.residual(1, n);
    double worst = 0, drift = 0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(sum_in[i] - sum_out[i] - r[i]));
      drift = std::max(drift, std::fabs(sum_in[i] - sum_out[i]));
    }
    EXPECT_LT(worst, 1e-3) << spec;
    // The lag itself stays bounded (a few steps' worth of gradient), it does not grow.
    EXPECT_LT(drift, 3.0) << spec;
  }
}

TEST(Codec, SameSeedSameBytesAndChunkingDoesNotChangeThem) {
  auto codec = must_make("qint8:bucket=256");
  const auto x = gaussian(1024, 8);
  const EncodeOptions o{.seed = 42, .stream = 3, .step = 17, .rank = 1};
  EXPECT_EQ(encode(*codec, x, o), encode(*codec, x, o));
  EncodeOptions other = o;
  other.seed = 43;
  EXPECT_NE(encode(*codec, x, o), encode(*codec, x, other));
  // Two chunks with their element offsets give the same codes and scales as one payload.
  const auto whole = encode(*codec, x, o);
  EncodeOptions second = o;
  second.element_offset = 512;
  const auto a = encode(*codec, std::span(x).first(512), o);
  const auto b = encode(*codec, std::span(x).subspan(512), second);
  const std::size_t kScales = 16 + 4 * 4;
  EXPECT_TRUE(std::equal(a.begin() + 16 + 8, a.end(), whole.begin() + kScales));
  EXPECT_TRUE(std::equal(b.begin() + 16 + 8, b.end(), whole.begin() + kScales + 512));
  EXPECT_TRUE(std::equal(a.begin() + 16, a.begin() + 24, whole.begin() + 16));
  EXPECT_TRUE(std::equal(b.begin() + 16, b.begin() + 24, whole.begin() + 24));
}

TEST(Codec, EncodeRejectsBadArguments) {
  auto codec = must_make("qint8");
  const auto x = gaussian(100, 9);
  std::vector<std::byte> out(codec->max_encoded_bytes(100));
  std::vector<std::byte> small(out.size() - 1);
  EXPECT_EQ(codec->encode(x.data(), DType::kInt8, 100, out, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(codec->encode(x.data(), DType::kFloat32, 100, small, {}).status().code(),
            StatusCode::kInvalidArgument);
  std::vector<float> r(99);
  EXPECT_EQ(codec->encode(x.data(), DType::kFloat32, 100, out, {.residual = r}).status().code(),
            StatusCode::kInvalidArgument);
  auto bad = x;
  bad[50] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(codec->encode(bad.data(), DType::kFloat32, 100, out, {}).status().code(),
            StatusCode::kInvalidArgument);
  bad[50] = std::nanf("");
  EXPECT_EQ(must_make("sign")->encode(bad.data(), DType::kFloat32, 100, out, {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Codec, DecodeRejectsAnotherCodecsPayloadAndWrongCounts) {
  const auto x = gaussian(100, 10);
  const auto payload = encode(*must_make("qint8"), x);
  std::vector<float> y(100);
  EXPECT_EQ(must_make("qint4")->decode(payload, y.data(), 100).code(), StatusCode::kBadFrame);
  EXPECT_EQ(must_make("qint8")->decode(payload, y.data(), 99).code(), StatusCode::kBadFrame);
  EXPECT_TRUE(must_make("qint8:bucket=4")->decode(payload, y.data(), 100).is_ok())
      << "parameters come from the payload";
}

TEST(Registry, ParsesPrintsAndRejectsSpecs) {
  for (const char* spec : {"float32", "float16", "bfloat16", "qint8:bucket=512,stochastic=1",
                           "qint4:bucket=256,stochastic=0", "sign:bucket=1024,momentum=0.9",
                           "topk:density=0.01,warmup=200,momentum=0.5,values=f16",
                           "qint4:bucket=256,stochastic=1,zstd,zstd_level=3,zstd_min_gain=0.05"}) {
    auto c = parse_codec_spec(spec);
    ASSERT_TRUE(c.is_ok()) << spec << c.status().to_string();
    EXPECT_EQ(to_spec(*c), spec);
  }
  EXPECT_EQ(parse_codec_spec("bf16")->codec, CodecId::kBFloat16);
  for (const char* spec : {"qint9", "qint8:bucket=abc", "qint8:bukket=5", "topk:values=f32",
                           "qint8:stochastic=2", "qint8:density=0.5", "sign:stochastic=0",
                           "topk:bucket=64", "float16:momentum=0.9", "qint4:warmup=5"}) {
    EXPECT_FALSE(parse_codec_spec(spec).is_ok()) << spec;
  }
  for (const char* spec :
       {"qint4:bucket=7", "sign:bucket=12", "qint8:bucket=0", "topk:density=0", "topk:density=1.5",
        "topk:momentum=1", "sign:momentum=1", "qint8:zstd,zstd_level=99"}) {
    EXPECT_EQ(make_codec(spec).status().code(), StatusCode::kInvalidArgument) << spec;
  }
  // The documented defaults (docs/compression.md): what "--codec NAME" means.
  EXPECT_EQ(must_make("sign")->spec(), "sign:bucket=512,momentum=0.9");
  EXPECT_EQ(must_make("topk")->spec(), "topk:density=0.01,warmup=50,momentum=0,values=bf16");
  EXPECT_EQ(must_make("qint8")->spec(), "qint8:bucket=512,stochastic=1");
}

TEST(Zstd, StagePaysOnSkewedCodesAndStoresRawFloats) {
  // Heavy-tailed values: most 4-bit codes are near zero, which zstd's entropy coder sees.
  auto x = gaussian(1 << 16, 11);
  for (std::size_t i = 0; i < x.size(); i += 97) x[i] *= 30.0f;
  auto q4 = must_make("qint4:bucket=4096,zstd");
  const auto payload = encode(*q4, x, {.seed = 1});
  auto h = read_header(payload);
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(h->codec, CodecId::kZstd);
  EXPECT_EQ(h->flags & 1u, 1u) << "compressed";
  EXPECT_LT(payload.size(), must_make("qint4:bucket=4096")->max_encoded_bytes(x.size()));
  EXPECT_EQ(decode(payload, x.size()),
            decode(encode(*must_make("qint4:bucket=4096"), x, {.seed = 1}), x.size()));

  auto raw = must_make("float32:zstd,zstd_min_gain=0.2");
  const auto stored = encode(*raw, gaussian(4096, 12));
  EXPECT_EQ(read_header(stored)->flags & 1u, 0u) << "random floats do not pay 20%";
  EXPECT_EQ(decode(stored, 4096), gaussian(4096, 12));
}

TEST(CounterRng, UniformIsUniformAndKeysDiffer) {
  const RngKey k = rng_key(1, 2, 3, 4);
  double mean = 0;
  const int n = 1 << 16;
  for (int i = 0; i < n; ++i) mean += rng_uniform(rng_bits(k, std::uint64_t(i)));
  EXPECT_NEAR(mean / n, 0.5, 0.01);
  EXPECT_NE(rng_bits(rng_key(1, 2, 3, 4), 0), rng_bits(rng_key(1, 2, 3, 5), 0));
  EXPECT_NE(rng_bits(k, std::uint64_t{5}), rng_bits(k, (std::uint64_t{1} << 32) + 5));
}

}  // namespace
}  // namespace tributary::compression
