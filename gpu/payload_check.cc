// check_payload(): the CPU qint decoder's validation (compression/qint.cc, decode_qint),
// without the decode, for payloads the GPU will decode. Kept in step with it by
// tests/gpu (garbage payloads must be rejected by both, valid ones accepted by both).
#include <bit>
#include <cstring>
#include <string>

#include "gpu/device_codec.h"

namespace tributary::gpu {
namespace {

using compression::CodecId;

Status bad(CodecId id, const std::string& what) {
  return error(StatusCode::kBadFrame,
               std::string(compression::to_string(id)) + " payload: " + what);
}

}  // namespace

Result<compression::PayloadHeader> check_payload(std::span<const std::byte> p, std::size_t count) {
  auto header = compression::read_header(p);
  if (!header) return header.status();
  const compression::PayloadHeader h = *header;
  if (h.codec != CodecId::kQInt8 && h.codec != CodecId::kQInt4) {
    return error(StatusCode::kInvalidArgument, std::string("gpu decode: codec ") +
                                                   std::string(compression::to_string(h.codec)) +
                                                   " is not decoded on the GPU");
  }
  if (h.count != count) {
    return bad(h.codec, "count " + std::to_string(h.count) + ", expected " + std::to_string(count));
  }
  const bool four = h.codec == CodecId::kQInt4;
  const std::uint64_t bucket = h.param;
  if (bucket == 0 || bucket > (std::uint64_t{1} << 24) || (four && bucket % 2 != 0)) {
    return bad(h.codec, "bad bucket size " + std::to_string(bucket));
  }
  if ((h.flags & ~1u) != 0) return bad(h.codec, "unknown flags");
  const std::uint64_t nb = (count + bucket - 1) / bucket;
  const std::uint64_t code_bytes = four ? (count + 1) / 2 : count;
  const std::uint64_t expected = compression::kHeaderBytes + 4 * nb + code_bytes;
  if (p.size() != expected) {
    return bad(h.codec,
               "size " + std::to_string(p.size()) + " bytes, expected " + std::to_string(expected));
  }
  const std::byte* scales = p.data() + compression::kHeaderBytes;
  for (std::uint64_t b = 0; b < nb; ++b) {
    std::uint32_t u;
    std::memcpy(&u, scales + 4 * b, 4);
    if (!(u < 0x7f800000u || u == 0x80000000u)) {
      return bad(h.codec, "scale of bucket " + std::to_string(b) + " is not finite and >= 0");
    }
  }
  if (four && count % 2 != 0 &&
      (std::to_integer<unsigned>(p[compression::kHeaderBytes + 4 * nb + code_bytes - 1]) >> 4) !=
          0) {
    return bad(h.codec, "non-zero pad nibble");
  }
  return h;
}

}  // namespace tributary::gpu
