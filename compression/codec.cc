// Header handling, the dtype-widening front of encode(), and decode dispatch by codec id.
#include "compression/codec.h"

#include <vector>

#include "compression/wire.h"
#include "core/reduce.h"

namespace tributary::compression {

std::string_view to_string(CodecId id) {
  switch (id) {
    case CodecId::kFloat32: return "float32";
    case CodecId::kFloat16: return "float16";
    case CodecId::kBFloat16: return "bfloat16";
    case CodecId::kQInt8: return "qint8";
    case CodecId::kQInt4: return "qint4";
    case CodecId::kTopK: return "topk";
    case CodecId::kSign: return "sign";
    case CodecId::kZstd: return "zstd";
  }
  return "unknown";
}

namespace wire {

void write_header(std::byte* out, const PayloadHeader& h) {
  out[0] = static_cast<std::byte>(kPayloadMagic & 0xff);
  out[1] = static_cast<std::byte>(kPayloadMagic >> 8);
  out[2] = static_cast<std::byte>(h.codec);
  out[3] = static_cast<std::byte>(h.version);
  store_u32(out + 4, h.count);
  store_u32(out + 8, h.param);
  store_u32(out + 12, h.flags);
}

Status decode_as(CodecId id, std::span<const std::byte> payload, float* out, std::size_t count,
                 bool accumulate) {
  TRIB_ASSIGN_OR_RETURN(const PayloadHeader header, read_header(payload));
  if (header.codec != id) {
    return bad_frame(id, "carries codec " + std::string(to_string(header.codec)));
  }
  return accumulate ? decode_accumulate_payload(payload, out, count)
                    : decode_payload(payload, out, count);
}

}  // namespace wire

Result<PayloadHeader> read_header(std::span<const std::byte> payload) {
  if (payload.size() < kHeaderBytes) {
    return error(StatusCode::kBadFrame, "codec payload: " + std::to_string(payload.size()) +
                                            " bytes, shorter than the 16-byte header");
  }
  const auto magic = static_cast<std::uint16_t>(std::to_integer<unsigned>(payload[0]) |
                                                (std::to_integer<unsigned>(payload[1]) << 8));
  if (magic != kPayloadMagic) return error(StatusCode::kBadFrame, "codec payload: bad magic");
  const auto id = std::to_integer<std::uint8_t>(payload[2]);
  if (id == 0 || id > kMaxCodecId) {
    return error(StatusCode::kBadFrame, "codec payload: unknown codec id " + std::to_string(id));
  }
  PayloadHeader h;
  h.codec = static_cast<CodecId>(id);
  h.version = std::to_integer<std::uint8_t>(payload[3]);
  if (h.version != kPayloadVersion) {
    return error(StatusCode::kBadFrame,
                 "codec payload: unsupported version " + std::to_string(h.version));
  }
  h.count = wire::load_u32(payload.data() + 4);
  h.param = wire::load_u32(payload.data() + 8);
  h.flags = wire::load_u32(payload.data() + 12);
  return h;
}

namespace {

Status dispatch(std::span<const std::byte> payload, float* out, std::size_t count,
                bool accumulate) {
  TRIB_ASSIGN_OR_RETURN(const PayloadHeader h, read_header(payload));
  if (h.count != count) {
    return wire::bad_frame(h.codec, "holds " + std::to_string(h.count) + " elements, expected " +
                                        std::to_string(count));
  }
  if (count > 0 && out == nullptr) {
    return error(StatusCode::kInvalidArgument, "decode: null output buffer");
  }
  switch (h.codec) {
    case CodecId::kFloat32:
    case CodecId::kFloat16:
    case CodecId::kBFloat16: return wire::decode_cast(h, payload, out, count, accumulate);
    case CodecId::kQInt8:
    case CodecId::kQInt4: return wire::decode_qint(h, payload, out, count, accumulate);
    case CodecId::kTopK: return wire::decode_topk(h, payload, out, count, accumulate);
    case CodecId::kSign: return wire::decode_sign(h, payload, out, count, accumulate);
    case CodecId::kZstd: return wire::decode_zstd(h, payload, out, count, accumulate);
  }
  return error(StatusCode::kBadFrame, "codec payload: unknown codec");
}

}  // namespace

Status decode_payload(std::span<const std::byte> payload, float* out, std::size_t count) {
  return dispatch(payload, out, count, false);
}

Status decode_accumulate_payload(std::span<const std::byte> payload, float* accum,
                                 std::size_t count) {
  return dispatch(payload, accum, count, true);
}

Status Codec::decode(std::span<const std::byte> payload, float* out, std::size_t count) const {
  return wire::decode_as(id(), payload, out, count, false);
}

Status Codec::decode_accumulate(std::span<const std::byte> payload, float* accum,
                                std::size_t count) const {
  return wire::decode_as(id(), payload, accum, count, true);
}

Result<std::size_t> Codec::encode(const void* data, DType dtype, std::size_t count,
                                  std::span<std::byte> out, const EncodeOptions& options) const {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return error(StatusCode::kInvalidArgument, "encode: dtype " +
                                                   std::string(tributary::to_string(dtype)) +
                                                   " is not float32, float16 or bfloat16");
  }
  if (count > kMaxPayloadElements) {
    return error(StatusCode::kInvalidArgument, "encode: more than 2^32-1 elements; chunk it");
  }
  if (count > 0 && data == nullptr) {
    return error(StatusCode::kInvalidArgument, "encode: null input");
  }
  if (out.size() < max_encoded_bytes(count)) {
    return error(
        StatusCode::kInvalidArgument,
        "encode: output span of " + std::to_string(out.size()) +
            " bytes is below max_encoded_bytes = " + std::to_string(max_encoded_bytes(count)));
  }
  if (!options.residual.empty() && options.residual.size() != count) {
    return error(StatusCode::kInvalidArgument, "encode: residual span size != count");
  }
  if (!options.momentum.empty() && options.momentum.size() != count) {
    return error(StatusCode::kInvalidArgument, "encode: momentum span size != count");
  }
  if (dtype == DType::kFloat32) {
    return encode_f32(static_cast<const float*>(data), count, out, options);
  }
  // Narrow inputs widen through a per-thread scratch buffer (kept between calls so the
  // steady state does not allocate).
  thread_local std::vector<float> wide;
  if (wide.size() < count) wide.resize(count);
  if (dtype == DType::kFloat16) {
    half_to_float(data, wide.data(), count);
  } else {
    bfloat16_to_float(data, wide.data(), count);
  }
  return encode_f32(wide.data(), count, out, options);
}

}  // namespace tributary::compression
