// Gradient codec payloads (compression/codec.h) from a peer: every decoder validates
// before it writes, never reads past the payload and never crashes, whatever the bytes.
// decode and decode_accumulate agree on what they accept.
#include <cmath>
#include <vector>

#include "compression/codec.h"
#include "core/check.h"

using namespace tributary;
using namespace tributary::compression;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(data), size);
  auto header = read_header(payload);
  if (!header) return 0;
  // The count comes from the payload: cap what this harness allocates for it (a real
  // receiver knows the count it expects and refuses others).
  const std::size_t count = std::min<std::size_t>(header->count, 1u << 13);
  std::vector<float> out(count + 1, 0.0f);
  out[count] = 12345.0f;  // a canary just past the end
  const Status decoded = decode_payload(payload, out.data(), count);
  TRIB_CHECK(out[count] == 12345.0f) << "decode wrote past count";
  std::vector<float> accum(count + 1, 1.0f);
  accum[count] = 12345.0f;
  const Status accumulated = decode_accumulate_payload(payload, accum.data(), count);
  TRIB_CHECK(accum[count] == 12345.0f) << "decode_accumulate wrote past count";
  TRIB_CHECK(decoded.is_ok() == accumulated.is_ok())
      << "decode and decode_accumulate disagree: " << decoded.to_string() << " vs "
      << accumulated.to_string();
  if (!accumulated.is_ok()) {
    for (std::size_t i = 0; i < count; ++i)
      TRIB_CHECK(accum[i] == 1.0f) << "a refused payload was partly accumulated";
  }
  return 0;
}
