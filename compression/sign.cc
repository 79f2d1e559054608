// Scaled sign (1-bit compression with error feedback, as in EF-signSGD and DeepSpeed's
// 1-bit Adam): 1 bit per element and one float32 scale per bucket, the bucket's root mean
// square, so the decoded bucket has the same L2 norm as what was compressed. Biased by
// design: run it with error feedback (wants_error_feedback() says so).
//
// Why the RMS and not the mean |v| (which minimises one step's error): the compressed
// all-reduce quantizes twice, and the owner's input (a sum of n sign vectors) is
// clustered at 0 and at +-n*s. The mean |v| sends the agreeing elements at about half
// their value and parks the rest in the residual; residuals then hold 15-25 steps of
// gradient and training diverges. Measured in docs/compression.md ("sign").
//
// scale = sqrt(total / float(n)), total = sum of v*v in a fixed order so that every
// clone agrees: eight lane sums a[l] += v[i]*v[i] over i = l (mod 8), i ascending from
// the bucket start, then ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)).
// bit i%8 of byte i/8 is 1 when v[i] < 0; decoded = bit ? -scale : +scale.
//
// Momentum correction (momentum=m > 0, the default 0.9): u = m*u + x, v = residual + u,
// so what is compressed is this worker's velocity plus what it has not sent; the
// optimizer must then not apply momentum again (wants_momentum()). Every element is sent
// every step, so there is no momentum masking.
#include <algorithm>
#include <bit>
#include <cmath>

#include "compression/wire.h"

namespace tributary::compression::wire {
namespace {

constexpr std::size_t kMaxBucket = std::size_t{1} << 24;

// The lane-ordered sum of squares (header comment) of v[0..n), also what the fused
// feed_* kernels below accumulate: one order everywhere, so all paths agree to the bit.
TRIB_CODEC_MULTIVERSION
float square_sum(const float* __restrict v, std::size_t n) {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::size_t full = n / 8 * 8;
  for (std::size_t i = 0; i < full; i += 8) {
    for (std::size_t l = 0; l < 8; ++l) a[l] += v[i + l] * v[i + l];
  }
  for (std::size_t i = full; i < n; ++i) a[i - full] += v[i] * v[i];
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// Error feedback and the sum of squares in one pass over the bucket: r = x + r (as
// add_residual), then the lanes of square_sum over the new r.
TRIB_CODEC_MULTIVERSION
float feed_square_sum(float* __restrict r, const float* __restrict x, std::size_t n) {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::size_t full = n / 8 * 8;
  for (std::size_t i = 0; i < full; i += 8) {
    for (std::size_t l = 0; l < 8; ++l) {
      const float v = x[i + l] + r[i + l];
      r[i + l] = v;
      a[l] += v * v;
    }
  }
  for (std::size_t i = full; i < n; ++i) {
    r[i] = x[i] + r[i];
    a[i - full] += r[i] * r[i];
  }
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// The same with momentum correction (as accumulate_momentum): u = m*u + x, r = r + u.
TRIB_CODEC_MULTIVERSION
float feed_momentum_square_sum(float* __restrict u, float* __restrict r, const float* __restrict x,
                               std::size_t n, float m) {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::size_t full = n / 8 * 8;
  for (std::size_t i = 0; i < full; i += 8) {
    for (std::size_t l = 0; l < 8; ++l) {
      const float w = m * u[i + l] + x[i + l];
      u[i + l] = w;
      const float v = r[i + l] + w;
      r[i + l] = v;
      a[l] += v * v;
    }
  }
  for (std::size_t i = full; i < n; ++i) {
    u[i] = m * u[i] + x[i];
    r[i] = r[i] + u[i];
    a[i - full] += r[i] * r[i];
  }
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

TRIB_CODEC_MULTIVERSION
void pack_signs(const float* __restrict v, std::uint8_t* __restrict out, std::size_t bytes) {
  for (std::size_t j = 0; j < bytes; ++j) {
    unsigned b = 0;
    for (unsigned k = 0; k < 8; ++k) b |= static_cast<unsigned>(v[8 * j + k] < 0.0f) << k;
    out[j] = static_cast<std::uint8_t>(b);
  }
}

// r = r - decoded, where decoded = (r < 0 ? -s : s) is what the packed bit says: the
// comparison is recomputed instead of read back from the bits, so the loop vectorises.
TRIB_CODEC_MULTIVERSION
void sign_residual(float* __restrict r, std::size_t n, float s) {
  for (std::size_t i = 0; i < n; ++i) r[i] = r[i] - (r[i] < 0.0f ? -s : s);
}

// decoded = bit ? -s : s, written as the bit flipping s's sign bit (which is what IEEE
// negation does, -0 included), so the loop vectorises without a branch or a blend.
TRIB_CODEC_MULTIVERSION
void unpack_signs(const std::uint8_t* __restrict bits, float* __restrict out, std::size_t bytes,
                  std::uint32_t s_bits) {
  for (std::size_t j = 0; j < bytes; ++j) {
    const std::uint32_t b = bits[j];
    for (unsigned k = 0; k < 8; ++k) {
      out[8 * j + k] = std::bit_cast<float>(s_bits ^ (((b >> k) & 1u) << 31));
    }
  }
}

TRIB_CODEC_MULTIVERSION
void unpack_signs_acc(const std::uint8_t* __restrict bits, float* __restrict out, std::size_t bytes,
                      std::uint32_t s_bits) {
  for (std::size_t j = 0; j < bytes; ++j) {
    const std::uint32_t b = bits[j];
    for (unsigned k = 0; k < 8; ++k) {
      out[8 * j + k] += std::bit_cast<float>(s_bits ^ (((b >> k) & 1u) << 31));
    }
  }
}

// The last bucket's tail (fewer than 8 elements) in scalar code.
void tail_encode(const float* v, std::uint8_t* out, std::size_t n) {
  unsigned b = 0;
  for (std::size_t k = 0; k < n; ++k) b |= static_cast<unsigned>(v[k] < 0.0f) << k;
  *out = static_cast<std::uint8_t>(b);
}

class SignCodec final : public Codec {
 public:
  explicit SignCodec(const CodecConfig& c) : config_(c), bucket_(c.bucket_size) {}
  CodecId id() const override { return CodecId::kSign; }
  std::string spec() const override { return to_spec(config_); }
  std::size_t max_encoded_bytes(std::size_t count) const override {
    return kHeaderBytes + 4 * ceil_div(count, bucket_) + ceil_div(count, 8);
  }
  bool wants_error_feedback() const override { return true; }
  bool wants_momentum() const override { return config_.momentum > 0.0f; }

 protected:
  Result<std::size_t> encode_f32(const float* x, std::size_t count, std::span<std::byte> out,
                                 const EncodeOptions& o) const override {
    const bool use_momentum = config_.momentum > 0.0f && !o.momentum.empty();
    if (use_momentum && o.residual.empty()) {
      return error(StatusCode::kInvalidArgument,
                   "sign encode: momentum correction needs a residual");
    }
    const std::size_t nb = ceil_div(count, bucket_);
    write_header(out.data(),
                 {id(), kPayloadVersion, static_cast<std::uint32_t>(count), bucket_, 0});
    std::byte* scales = out.data() + kHeaderBytes;
    auto* bits = reinterpret_cast<std::uint8_t*>(scales + 4 * nb);
    float* r = o.residual.empty() ? nullptr : o.residual.data();
    for (std::size_t b = 0; b < nb; ++b) {
      const std::size_t begin = b * bucket_;
      const std::size_t n = std::min<std::size_t>(bucket_, count - begin);
      const float* v = x + begin;
      float total = 0;
      if (use_momentum) {
        total = feed_momentum_square_sum(o.momentum.data() + begin, r + begin, x + begin, n,
                                         config_.momentum);
        v = r + begin;
      } else if (r != nullptr) {
        total = feed_square_sum(r + begin, x + begin, n);
        v = r + begin;
      } else {
        total = square_sum(v, n);
      }
      if (!std::isfinite(total)) {
        return error(StatusCode::kInvalidArgument,
                     "sign encode: non-finite value (or sum of squares overflow) in bucket " +
                         std::to_string(b));
      }
      const float scale = std::sqrt(total / static_cast<float>(n));
      std::memcpy(scales + 4 * b, &scale, 4);
      std::uint8_t* bb = bits + begin / 8;
      const std::size_t full = n / 8;
      pack_signs(v, bb, full);
      if (n % 8 != 0) tail_encode(v + 8 * full, bb + full, n % 8);
      if (r != nullptr) sign_residual(r + begin, n, scale);
    }
    return max_encoded_bytes(count);
  }

 private:
  CodecConfig config_;
  std::uint32_t bucket_;
};

}  // namespace

std::unique_ptr<Codec> make_sign_codec(const CodecConfig& c) {
  return std::make_unique<SignCodec>(c);
}

Status decode_sign(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate) {
  const std::size_t bucket = h.param;
  if (bucket == 0 || bucket > kMaxBucket || bucket % 8 != 0) {
    return bad_frame(h.codec, "bad bucket size " + std::to_string(bucket));
  }
  if (h.flags != 0) return bad_frame(h.codec, "unknown flags");
  const std::uint64_t nb = ceil_div(count, bucket);
  const std::uint64_t bit_bytes = ceil_div(count, 8);
  TRIB_RETURN_IF_ERROR(expect_size(h.codec, p.size(), kHeaderBytes + 4 * nb + bit_bytes));
  const std::byte* scales = p.data() + kHeaderBytes;
  const auto* bits = reinterpret_cast<const std::uint8_t*>(scales + 4 * nb);
  for (std::uint64_t b = 0; b < nb; ++b) {
    if (!valid_scale(load_f32(scales + 4 * b))) {
      return bad_frame(h.codec, "scale of bucket " + std::to_string(b) + " is not finite and >= 0");
    }
  }
  if (count % 8 != 0 && (bits[bit_bytes - 1] >> (count % 8)) != 0) {
    return bad_frame(h.codec, "non-zero pad bits");
  }
  for (std::uint64_t b = 0; b < nb; ++b) {
    const std::size_t begin = b * bucket;
    const std::size_t n = std::min<std::size_t>(bucket, count - begin);
    const float s = load_f32(scales + 4 * b);
    const std::uint8_t* bb = bits + begin / 8;
    const std::size_t full = n / 8;
    const auto s_bits = std::bit_cast<std::uint32_t>(s);
    accumulate ? unpack_signs_acc(bb, out + begin, full, s_bits)
               : unpack_signs(bb, out + begin, full, s_bits);
    for (std::size_t k = 8 * full; k < n; ++k) {
      const float v = ((bb[full] >> (k - 8 * full)) & 1u) ? -s : s;
      out[begin + k] = accumulate ? out[begin + k] + v : v;
    }
  }
  return Status::ok();
}

}  // namespace tributary::compression::wire
