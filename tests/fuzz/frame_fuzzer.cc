// Data-plane frames (transport/tcp/frame.h): any 56 bytes decode to a validated header or
// kBadFrame; a header that decodes re-encodes to the same bytes; abort payloads likewise.
// The byte after the header picks the length limit and, in its low bit, whether the
// header's CRC is recomputed first (else almost no mutation would pass the CRC, and the
// field checks behind it would go unexplored).
#include <cstring>

#include "transport/tcp/frame.h"
#include "core/check.h"
#include "core/crc32c.h"

using namespace tributary;
using namespace tributary::transport;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  if (size >= transport::kFrameHeaderBytes) {
    transport::FrameHeaderBytes raw;
    std::memcpy(raw.data(), bytes, raw.size());
    const std::uint64_t limit = size > transport::kFrameHeaderBytes ? data[transport::kFrameHeaderBytes] << 12 : 1u << 30;
    if (size > transport::kFrameHeaderBytes && (data[transport::kFrameHeaderBytes] & 1) != 0) {
      const std::uint32_t crc = crc32c({raw.data(), transport::kFrameHeaderBytes - 4});
      for (int i = 0; i < 4; ++i) {
        raw[transport::kFrameHeaderBytes - 4 + i] = static_cast<std::byte>(crc >> (8 * i));
      }
    }
    auto header = transport::decode_frame_header(raw, limit);
    if (header) {
      TRIB_CHECK(header->length <= limit) << "length past the limit";
      TRIB_CHECK(transport::encode_frame_header(*header) == raw) << "header does not round-trip";
    }
  }
  auto notice = transport::decode_abort_payload({bytes, size});
  if (notice) {
    TRIB_CHECK(notice->code != StatusCode::kOk) << "abort notice with code ok";
    const auto frame = transport::encode_abort_frame(1, *notice);
    TRIB_CHECK(frame.size() == transport::kFrameHeaderBytes + transport::frame_body_bytes(size))
        << "abort notice does not round-trip";
    TRIB_CHECK(std::memcmp(frame.data() + transport::kFrameHeaderBytes, bytes, size) == 0)
        << "abort notice does not round-trip";
    TRIB_CHECK(decode_frame_trailer(std::span<const std::byte, transport::kFrameTrailerBytes>(
                   frame.data() + transport::kFrameHeaderBytes + size, transport::kFrameTrailerBytes)) ==
               crc32c({bytes, size}))
        << "abort frame's trailer is not its payload's CRC-32C";
  }
  return 0;
}
