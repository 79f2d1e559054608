#include "agent/result_copy.h"

#include <cstring>
#include <string>

namespace tributary::agent {
namespace {
void put_u64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}
std::uint64_t get_u64(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{std::to_integer<std::uint8_t>(in[at + i])} << (8 * i);
  return v;
}
}  // namespace

std::vector<std::byte> encode_result_copy(const ResultCopy& copy) {
  std::vector<std::byte> out;
  out.reserve(16 + 8 * copy.contributors.size() + copy.bytes.size());
  put_u64(out, copy.epoch);
  put_u64(out, copy.contributors.size());
  for (std::uint64_t id : copy.contributors) put_u64(out, id);
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
