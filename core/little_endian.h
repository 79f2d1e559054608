// Unsigned integers in little-endian byte order, whatever the host's: the one reader and
// writer of every byte format of the project (data frames, failover controls, RDMA setup
// messages, codec payloads, result copies, view deltas, the journal), instead of a
// hand-written set per format. On a little-endian host a load or store is one memcpy,
// which the compiler turns into a single move.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace tributary::le {

template <std::unsigned_integral T>
inline void store(void* at, T v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(at, &v, sizeof v);
  } else {
    auto* p = static_cast<unsigned char*>(at);
    for (std::size_t i = 0; i < sizeof v; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
  }
}

template <std::unsigned_integral T>
inline T load(const void* at) {
  if constexpr (std::endian::native == std::endian::little) {
    T v;
    std::memcpy(&v, at, sizeof v);
    return v;
  } else {
    const auto* p = static_cast<const unsigned char*>(at);
    T v = 0;
    for (std::size_t i = 0; i < sizeof v; ++i) v |= static_cast<T>(T{p[i]} << (8 * i));
    return v;
  }
}

// Appends `v` to a growing buffer.
template <std::unsigned_integral T>
inline void append(std::vector<std::byte>& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  store(out.data() + at, v);
}

template <std::unsigned_integral T>
inline void append(std::string& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  store(out.data() + at, v);
}

}  // namespace tributary::le
