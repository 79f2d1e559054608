// qint8 / qint4: symmetric linear quantization with one float32 scale per bucket.
//
// Per bucket (elements [b*B, min((b+1)*B, count)) of the payload):
//   amax  = max |v|                        (v = x, or x + residual with error feedback)
//   scale = amax / L      (stored)         L = 127 (qint8) or 7 (qint4)
//   inv   = L / amax, or 0 when amax == 0 or L / amax overflows (amax < L / FLT_MAX:
//           such a bucket is all (near-)zeros and encodes as zeros; error feedback keeps
//           the mass)
//   t     = v * inv                        float multiply, round to nearest
//   q     = clamp(floor(t + u), -L, L)     stochastic, u = rng_uniform(bits(e))
//         = clamp(rne(t), -L, L)           otherwise
//   decoded = float(q) * scale
// Every step is one IEEE float operation with no contraction (the target builds with
// -ffp-contract=off), so AVX-512, AVX2, the baseline and the CUDA port agree to the bit.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "compression/counter_rng.h"
#include "compression/wire.h"

namespace tributary::compression::wire {
namespace {

constexpr std::size_t kMaxBucket = std::size_t{1} << 24;
constexpr std::size_t kChunk = 2048;  // qint4 stages codes through the stack in chunks

TRIB_CODEC_MULTIVERSION
std::uint32_t amax_bits(const float* __restrict v, std::size_t n) {
  // For non-negative floats the integer order of the bits is the float order, and every
  // NaN or inf compares above the largest finite value: one integer max finds both.
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t a = std::bit_cast<std::uint32_t>(v[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return m;
}

// floor() and round-to-nearest-even written with truncating conversions and a magic
// constant, so that the baseline (SSE2, no roundps) clone vectorises too.
inline float floor_small(float y) {
  const float t = static_cast<float>(static_cast<std::int32_t>(y));
  return t > y ? t - 1.0f : t;
}
inline float rne_small(float t) { return (t + 0x1.8p23f) - 0x1.8p23f; }  // |t| < 2^22

TRIB_CODEC_MULTIVERSION
void quantize_stochastic(const float* __restrict v, std::int8_t* __restrict q, std::size_t n,
                         float inv, float levels, std::uint32_t lo0, std::uint32_t k0,
                         std::uint32_t k1h) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits =
        lowbias32(lowbias32((lo0 + static_cast<std::uint32_t>(i)) ^ k0) ^ k1h);
    const float u = static_cast<float>(bits >> 8) * 0x1p-24f;
    float c = floor_small(v[i] * inv + u);
    c = c > levels ? levels : c;
    c = c < -levels ? -levels : c;
    q[i] = static_cast<std::int8_t>(static_cast<std::int32_t>(c));
  }
}

TRIB_CODEC_MULTIVERSION
void quantize_nearest(const float* __restrict v, std::int8_t* __restrict q, std::size_t n,
                      float inv, float levels) {
  for (std::size_t i = 0; i < n; ++i) {
    float c = rne_small(v[i] * inv);
    c = c > levels ? levels : c;
    c = c < -levels ? -levels : c;
    q[i] = static_cast<std::int8_t>(static_cast<std::int32_t>(c));
  }
}

TRIB_CODEC_MULTIVERSION
void residual_update(float* __restrict r, const std::int8_t* __restrict q, std::size_t n,
                     float scale) {
  for (std::size_t i = 0; i < n; ++i) r[i] = r[i] - static_cast<float>(q[i]) * scale;
}

TRIB_CODEC_MULTIVERSION
void pack4(const std::int8_t* __restrict q, std::uint8_t* __restrict out, std::size_t pairs) {
  for (std::size_t j = 0; j < pairs; ++j) {
    out[j] = static_cast<std::uint8_t>((q[2 * j] + 8) | ((q[2 * j + 1] + 8) << 4));
  }
}

TRIB_CODEC_MULTIVERSION
void dequant8(const std::int8_t* __restrict q, float* __restrict out, std::size_t n, float s) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * s;
}
TRIB_CODEC_MULTIVERSION
void dequant8_acc(const std::int8_t* __restrict q, float* __restrict out, std::size_t n, float s) {
  for (std::size_t i = 0; i < n; ++i) out[i] += static_cast<float>(q[i]) * s;
}
TRIB_CODEC_MULTIVERSION
void dequant4(const std::uint8_t* __restrict b, float* __restrict out, std::size_t pairs, float s) {
  for (std::size_t j = 0; j < pairs; ++j) {
    out[2 * j] = static_cast<float>(static_cast<int>(b[j] & 15u) - 8) * s;
    out[2 * j + 1] = static_cast<float>(static_cast<int>(b[j] >> 4) - 8) * s;
  }
}
TRIB_CODEC_MULTIVERSION
void dequant4_acc(const std::uint8_t* __restrict b, float* __restrict out, std::size_t pairs,
                  float s) {
  for (std::size_t j = 0; j < pairs; ++j) {
    out[2 * j] += static_cast<float>(static_cast<int>(b[j] & 15u) - 8) * s;
    out[2 * j + 1] += static_cast<float>(static_cast<int>(b[j] >> 4) - 8) * s;
  }
}

// Quantizes v[0..n) whose first element has tensor index e0, splitting where the high
// 32 bits of the index change so the kernel runs in 32-bit lanes.
void quantize(const float* v, std::int8_t* q, std::size_t n, float inv, float levels,
              bool stochastic, RngKey key, std::uint64_t e0) {
  if (!stochastic) {
    quantize_nearest(v, q, n, inv, levels);
    return;
  }
  std::size_t i = 0;
  while (i < n) {
    const std::uint64_t e = e0 + i;
    const std::uint64_t to_wrap = (std::uint64_t{1} << 32) - (e & 0xffffffffu);
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(n - i, to_wrap));
    quantize_stochastic(v + i, q + i, len, inv, levels, static_cast<std::uint32_t>(e), key.k0,
                        key.k1 ^ static_cast<std::uint32_t>(e >> 32));
    i += len;
  }
}

class QIntCodec final : public Codec {
 public:
  QIntCodec(int bits, std::uint32_t bucket, bool stochastic)
      : bits_(bits), bucket_(bucket), stochastic_(stochastic) {}

  CodecId id() const override { return bits_ == 8 ? CodecId::kQInt8 : CodecId::kQInt4; }
  std::string spec() const override {
    return std::string(to_string(id())) + ":bucket=" + std::to_string(bucket_) +
           ",stochastic=" + (stochastic_ ? "1" : "0");
  }
  std::size_t max_encoded_bytes(std::size_t count) const override {
    return kHeaderBytes + 4 * ceil_div(count, bucket_) + (bits_ == 8 ? count : ceil_div(count, 2));
  }

 protected:
  Result<std::size_t> encode_f32(const float* x, std::size_t count, std::span<std::byte> out,
                                 const EncodeOptions& o) const override {
    const std::size_t nb = ceil_div(count, bucket_);
    write_header(out.data(), {id(), kPayloadVersion, static_cast<std::uint32_t>(count), bucket_,
                              stochastic_ ? 1u : 0u});
    std::byte* scales = out.data() + kHeaderBytes;
    std::byte* codes = scales + 4 * nb;
    const float levels = bits_ == 8 ? 127.0f : 7.0f;
    const RngKey key = rng_key(o.seed, o.stream, o.step, o.rank);
    float* r = o.residual.empty() ? nullptr : o.residual.data();
    std::int8_t staged[kChunk];
    for (std::size_t b = 0; b < nb; ++b) {
      const std::size_t begin = b * bucket_;
      const std::size_t n = std::min<std::size_t>(bucket_, count - begin);
      const float* v = x + begin;
      if (r != nullptr) {
        add_residual(r + begin, x + begin, n);  // the residual now holds v = x + r
        v = r + begin;
      }
      const std::uint32_t mbits = amax_bits(v, n);
      if (mbits >= 0x7f800000u) {
        return error(StatusCode::kInvalidArgument, std::string(to_string(id())) +
                                                       " encode: non-finite value in bucket " +
                                                       std::to_string(b));
      }
      const float amax = std::bit_cast<float>(mbits);
      const float scale = amax / levels;
      float inv = amax > 0.0f ? levels / amax : 0.0f;
      if (!std::isfinite(inv)) inv = 0.0f;  // else t = +-inf and the int casts are undefined
      std::memcpy(scales + 4 * b, &scale, 4);
      if (bits_ == 8) {
        auto* q = reinterpret_cast<std::int8_t*>(codes) + begin;
        quantize(v, q, n, inv, levels, stochastic_, key, o.element_offset + begin);
        if (r != nullptr) residual_update(r + begin, q, n, scale);
        continue;
      }
      // qint4: buckets are even-sized, so every bucket and chunk starts on a byte.
      auto* packed = reinterpret_cast<std::uint8_t*>(codes) + begin / 2;
      for (std::size_t c = 0; c < n; c += kChunk) {
        const std::size_t m = std::min(kChunk, n - c);
        quantize(v + c, staged, m, inv, levels, stochastic_, key, o.element_offset + begin + c);
        if (m % 2 != 0) staged[m] = -8;  // the pad nibble of an odd tail encodes as 0
        pack4(staged, packed + c / 2, ceil_div(m, 2));
        if (r != nullptr) residual_update(r + begin + c, staged, m, scale);
      }
    }
    return max_encoded_bytes(count);
  }

 private:
  int bits_;
  std::uint32_t bucket_;
  bool stochastic_;
};

}  // namespace

std::unique_ptr<Codec> make_qint_codec(const CodecConfig& c) {
  return std::make_unique<QIntCodec>(c.codec == CodecId::kQInt8 ? 8 : 4, c.bucket_size,
                                     c.stochastic);
}

Status decode_qint(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate) {
  const bool four = h.codec == CodecId::kQInt4;
  const std::size_t bucket = h.param;
  if (bucket == 0 || bucket > kMaxBucket || (four && bucket % 2 != 0)) {
    return bad_frame(h.codec, "bad bucket size " + std::to_string(bucket));
  }
  if ((h.flags & ~1u) != 0) return bad_frame(h.codec, "unknown flags");
  const std::uint64_t nb = ceil_div(count, bucket);
  const std::uint64_t code_bytes = four ? ceil_div(count, 2) : count;
  TRIB_RETURN_IF_ERROR(expect_size(h.codec, p.size(), kHeaderBytes + 4 * nb + code_bytes));
  const std::byte* scales = p.data() + kHeaderBytes;
  const std::byte* codes = scales + 4 * nb;
  for (std::uint64_t b = 0; b < nb; ++b) {
    if (!valid_scale(load_f32(scales + 4 * b))) {
      return bad_frame(h.codec, "scale of bucket " + std::to_string(b) + " is not finite and >= 0");
    }
  }
  if (four && count % 2 != 0 && (std::to_integer<unsigned>(codes[code_bytes - 1]) >> 4) != 0) {
    return bad_frame(h.codec, "non-zero pad nibble");
  }
  for (std::uint64_t b = 0; b < nb; ++b) {
    const std::size_t begin = b * bucket;
    const std::size_t n = std::min<std::size_t>(bucket, count - begin);
    const float s = load_f32(scales + 4 * b);
    if (!four) {
      const auto* q = reinterpret_cast<const std::int8_t*>(codes) + begin;
      accumulate ? dequant8_acc(q, out + begin, n, s) : dequant8(q, out + begin, n, s);
      continue;
    }
    const auto* packed = reinterpret_cast<const std::uint8_t*>(codes) + begin / 2;
    const std::size_t pairs = n / 2;
    accumulate ? dequant4_acc(packed, out + begin, pairs, s)
               : dequant4(packed, out + begin, pairs, s);
    if (n % 2 != 0) {  // odd tail (last bucket only)
      const float v = static_cast<float>(static_cast<int>(packed[pairs] & 15u) - 8) * s;
      out[begin + n - 1] = accumulate ? out[begin + n - 1] + v : v;
    }
  }
  return Status::ok();
}

}  // namespace tributary::compression::wire
