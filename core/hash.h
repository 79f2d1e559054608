// Hashes and their printing, in one place: FNV-1a for cheap descriptors that ranks compare
// (tags, plans), SHA-256 for content that must not be confused (training state, journal
// and benchmark checks), hex for printing either.
//
// FNV-1a is not a cryptographic hash: use it only where an accidental collision is the
// worst case (two ranks that disagree are caught by the first differing byte anyway).
// Sha256 owns its OpenSSL context (no manual free on each exit path).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace tributary {

// 32-bit FNV-1a, fed incrementally. add_le() mixes the low `bytes` bytes of a value,
// least significant first, so the result does not depend on the host's byte order.
class Fnv1a32 {
 public:
  Fnv1a32& add(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (std::size_t i = 0; i < size; ++i) h_ = (h_ ^ p[i]) * 16777619u;
    return *this;
  }
  Fnv1a32& add(std::string_view text) { return add(text.data(), text.size()); }
  Fnv1a32& add_le(std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i)
      h_ = (h_ ^ static_cast<std::uint8_t>(value >> (8 * i))) * 16777619u;
    return *this;
  }
  std::uint32_t value() const { return h_; }

 private:
  std::uint32_t h_ = 2166136261u;
};

// 64-bit FNV-1a of a byte range.
std::uint64_t fnv1a64(std::span<const std::byte> bytes);

using Sha256Digest = std::array<std::uint8_t, 32>;

// SHA-256 over any number of update() calls. Errors from OpenSSL (allocation) are
// TRIB_CHECK failures: there is no cluster event behind them.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  Sha256& update(const void* data, std::size_t size);
  Sha256& update(std::span<const std::byte> bytes) { return update(bytes.data(), bytes.size()); }
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  // The digest of everything updated so far; the object is spent afterwards.
  Sha256Digest finish();

  static Sha256Digest of(std::span<const std::byte> bytes) {
    return Sha256().update(bytes).finish();
  }

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

// Lower-case hex, two digits per byte.
std::string to_hex(std::span<const std::uint8_t> bytes);
inline std::string to_hex(std::span<const std::byte> bytes) {
  return to_hex(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                              bytes.size()));
}

}  // namespace tributary
