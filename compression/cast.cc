// float32 / float16 / bfloat16 casts: the body is the count elements, little-endian,
// converted with core's round-to-nearest-even converters (bit-identical on every clone).
#include <algorithm>
#include <cstring>

#include "compression/wire.h"
#include "core/reduce.h"

namespace tributary::compression::wire {
namespace {

constexpr std::size_t kBlock = 2048;  // elements per stack block (fits L1 with its temps)

std::size_t elem_bytes(CodecId id) { return id == CodecId::kFloat32 ? 4 : 2; }

void narrow_block(CodecId id, const float* in, std::byte* out, std::size_t n) {
  if (n == 0) return;  // empty tensors may come with null pointers
  if (id == CodecId::kFloat32) {
    std::memcpy(out, in, n * 4);
  } else if (id == CodecId::kFloat16) {
    float_to_half(in, out, n);
  } else {
    float_to_bfloat16(in, out, n);
  }
}

void widen_block(CodecId id, const std::byte* in, float* out, std::size_t n) {
  if (n == 0) return;
  if (id == CodecId::kFloat32) {
    std::memcpy(out, in, n * 4);
  } else if (id == CodecId::kFloat16) {
    half_to_float(in, out, n);
  } else {
    bfloat16_to_float(in, out, n);
  }
}

TRIB_CODEC_MULTIVERSION
void add_into(float* __restrict acc, const float* __restrict v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] += v[i];
}

TRIB_CODEC_MULTIVERSION
void feedback_in(float* __restrict v, const float* __restrict x, const float* __restrict r,
                 std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) v[i] = x[i] + r[i];
}

TRIB_CODEC_MULTIVERSION
void feedback_out(float* __restrict r, const float* __restrict v, const float* __restrict d,
                  std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = v[i] - d[i];
}

class CastCodec final : public Codec {
 public:
  explicit CastCodec(CodecId id) : id_(id) {}
  CodecId id() const override { return id_; }
  std::string spec() const override { return std::string(to_string(id_)); }
  std::size_t max_encoded_bytes(std::size_t count) const override {
    return kHeaderBytes + count * elem_bytes(id_);
  }

 protected:
  Result<std::size_t> encode_f32(const float* x, std::size_t count, std::span<std::byte> out,
                                 const EncodeOptions& options) const override {
    write_header(out.data(), {id_, kPayloadVersion, static_cast<std::uint32_t>(count), 0, 0});
    std::byte* body = out.data() + kHeaderBytes;
    const std::size_t eb = elem_bytes(id_);
    if (options.residual.empty()) {
      narrow_block(id_, x, body, count);
    } else {
      float* r = options.residual.data();
      float v[kBlock];
      float d[kBlock];
      for (std::size_t i = 0; i < count; i += kBlock) {
        const std::size_t n = std::min(kBlock, count - i);
        feedback_in(v, x + i, r + i, n);
        narrow_block(id_, v, body + i * eb, n);
        widen_block(id_, body + i * eb, d, n);
        feedback_out(r + i, v, d, n);
      }
    }
    return kHeaderBytes + count * eb;
  }

 private:
  CodecId id_;
};

}  // namespace

std::unique_ptr<Codec> make_cast_codec(CodecId id) { return std::make_unique<CastCodec>(id); }

Status decode_cast(const PayloadHeader& h, std::span<const std::byte> p, float* out,
                   std::size_t count, bool accumulate) {
  if (h.param != 0 || h.flags != 0) return bad_frame(h.codec, "non-zero param/flags");
  const std::size_t eb = elem_bytes(h.codec);
  TRIB_RETURN_IF_ERROR(expect_size(h.codec, p.size(), kHeaderBytes + std::uint64_t{count} * eb));
  const std::byte* body = p.data() + kHeaderBytes;
  if (!accumulate) {
    widen_block(h.codec, body, out, count);
    return Status::ok();
  }
  float d[kBlock];
  for (std::size_t i = 0; i < count; i += kBlock) {
    const std::size_t n = std::min(kBlock, count - i);
    widen_block(h.codec, body + i * eb, d, n);
    add_into(out + i, d, n);
  }
  return Status::ok();
}

}  // namespace tributary::compression::wire
