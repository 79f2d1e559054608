#include "agent/result_copy.h"

#include <cstring>
#include <string>

#include "core/little_endian.h"

namespace tributary::agent {
namespace {
std::uint64_t get_u64(std::span<const std::byte> in, std::size_t at) {
  return le::load<std::uint64_t>(in.subspan(at, 8).data());
}
}  // namespace

std::vector<std::byte> encode_result_copy(const ResultCopy& copy) {
  std::vector<std::byte> out;
  out.reserve(16 + 8 * copy.contributors.size() + copy.bytes.size());
  le::append<std::uint64_t>(out, copy.epoch);
  le::append<std::uint64_t>(out, copy.contributors.size());
  for (std::uint64_t id : copy.contributors) le::append<std::uint64_t>(out, id);
  out.insert(out.end(), copy.bytes.begin(), copy.bytes.end());
  return out;
}

Status decode_result_copy(std::span<const std::byte> blob, std::uint64_t seq, ResultCopy& out) {
  if (blob.size() < 16) {
    return error(StatusCode::kBadFrame,
                 "repair of seq " + std::to_string(seq) + ": a copy of " +
                     std::to_string(blob.size()) + " bytes is shorter than its header");
  }
  const std::uint64_t ids = get_u64(blob, 8);
  if (ids == 0 || ids > (blob.size() - 16) / 8) {
    return error(StatusCode::kBadFrame, "repair of seq " + std::to_string(seq) + ": a copy naming " +
                                            std::to_string(ids) + " contributors in " +
                                            std::to_string(blob.size()) + " bytes");
  }
  out.held = true;
  out.seq = seq;
  out.epoch = get_u64(blob, 0);
  out.contributors.resize(ids);
  for (std::size_t i = 0; i < ids; ++i) out.contributors[i] = get_u64(blob, 16 + 8 * i);
  const std::size_t header = 16 + 8 * ids;
  out.bytes.assign(blob.begin() + static_cast<std::ptrdiff_t>(header), blob.end());
  return Status::ok();
}

}  // namespace tributary::agent
