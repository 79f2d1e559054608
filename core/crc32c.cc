#include "core/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>

namespace tributary {
namespace {

// ISA-L takes the length as an int; frames are bounded at 1 GiB, but a caller's span may not be.
constexpr std::size_t kMaxPiece = std::size_t{1} << 30;

// ISA-L's iSCSI functions carry the CRC register itself, without the initial and final
// inversion that CRC-32C's definition adds.
template <unsigned (*Fn)(unsigned char*, int, unsigned)>
std::uint32_t run(std::span<const std::byte> data, std::uint32_t crc) {
  // ISA-L only reads the buffer; its prototype predates const.
  auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(data.data()));
  std::uint32_t reg = ~crc;
  for (std::size_t left = data.size(); left > 0;) {
    const std::size_t piece = std::min(left, kMaxPiece);
    reg = Fn(p, static_cast<int>(piece), reg);
    p += piece;
    left -= piece;
  }
  return ~reg;
}

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) {
  return run<crc32_iscsi>(data, crc);
}

std::uint32_t crc32c_reference(std::span<const std::byte> data, std::uint32_t crc) {
  return run<crc32_iscsi_base>(data, crc);
}

}  // namespace tributary
