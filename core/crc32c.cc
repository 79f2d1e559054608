#include "core/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/crc32c_fold.h"

namespace tributary {
namespace {

// ISA-L takes the length as an int; frames are bounded at 1 GiB, but a caller's span may not be.
constexpr std::size_t kMaxPiece = std::size_t{1} << 30;

unsigned char* bytes_of(const std::byte* p) {
  // ISA-L only reads the buffer; its prototype predates const.
  return reinterpret_cast<unsigned char*>(const_cast<std::byte*>(p));
}

// ISA-L's iSCSI functions carry the CRC register itself, without the initial and final
// inversion that CRC-32C's definition adds.
template <unsigned (*Fn)(unsigned char*, int, unsigned)>
std::uint32_t run_register(const std::byte* p, std::size_t n, std::uint32_t reg) {
  for (std::size_t left = n; left > 0;) {
    const std::size_t piece = std::min(left, kMaxPiece);
    reg = Fn(bytes_of(p), static_cast<int>(piece), reg);
    p += piece;
    left -= piece;
  }
  return reg;
}

std::uint32_t isal(std::span<const std::byte> data, std::uint32_t crc) {
  return ~run_register<crc32_iscsi>(data.data(), data.size(), ~crc);
}

// Requires crc32c_fold::supported().
std::uint32_t fold_then_isal(std::span<const std::byte> data, std::uint32_t crc) {
  const crc32c_fold::Progress done = crc32c_fold::fold(data.data(), data.size(), ~crc);
  return ~run_register<crc32_iscsi>(data.data() + done.consumed, data.size() - done.consumed,
                                    done.reg);
}

std::uint32_t folded(std::span<const std::byte> data, std::uint32_t crc) {
  return crc32c_fold::supported() ? fold_then_isal(data, crc) : isal(data, crc);
}

// The faster of the two on this CPU, timed once (tens of microseconds) on a buffer that
// stays in cache, as the frames' pieces do; ISA-L unless folding is clearly faster. Both
// give the same value: the choice moves only the speed.
bool fold_is_faster() {
  if (!crc32c_fold::supported()) return false;
  std::vector<std::byte> buf(16 * 1024);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::byte>(i * 131 + 7);
  using Clock = std::chrono::steady_clock;
  auto best_of = [&](auto&& fn) {
    Clock::duration best = Clock::duration::max();
    volatile std::uint32_t sink = 0;
    for (int i = 0; i < 9; ++i) {
      const auto t0 = Clock::now();
      for (int r = 0; r < 4; ++r) sink = sink ^ fn(buf, static_cast<std::uint32_t>(r));
      best = std::min(best, Clock::now() - t0);
    }
    return best;
  };
  best_of(folded);  // constants and caches warm
  const auto t_isal = best_of(isal);
  const auto t_fold = best_of(folded);
  return t_fold * 10 < t_isal * 9;
}

bool use_fold() {
  static const bool fold = fold_is_faster();
  return fold;
}

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) {
  // use_fold() holds only where the CPU supports the folding: not asked again per call.
  return use_fold() ? fold_then_isal(data, crc) : isal(data, crc);
}

std::uint32_t crc32c_isal(std::span<const std::byte> data, std::uint32_t crc) {
  return isal(data, crc);
}

std::uint32_t crc32c_folded(std::span<const std::byte> data, std::uint32_t crc) {
  return folded(data, crc);
}

const char* crc32c_engine() { return use_fold() ? "fold" : "isal"; }

std::uint32_t crc32c_reference(std::span<const std::byte> data, std::uint32_t crc) {
  return ~run_register<crc32_iscsi_base>(data.data(), data.size(), ~crc);
}

}  // namespace tributary
