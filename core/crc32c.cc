#include "core/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace tributary {
namespace {

constexpr std::uint32_t kPoly = 0x82f63b78;  // 0x1EDC6F41 reflected

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][b] = c;
    }
    for (std::uint32_t b = 0; b < 256; ++b) {
      for (std::size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
    }
  }
};
constexpr Tables kTables;

std::uint32_t software(const unsigned char* p, std::size_t n, std::uint32_t crc) {
  const auto& t = kTables.t;
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
    crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    --n;
  }
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    word ^= crc;
    crc = t[7][word & 0xff] ^ t[6][(word >> 8) & 0xff] ^ t[5][(word >> 16) & 0xff] ^
          t[4][(word >> 24) & 0xff] ^ t[3][(word >> 32) & 0xff] ^ t[2][(word >> 40) & 0xff] ^
          t[1][(word >> 48) & 0xff] ^ t[0][word >> 56];
  }
  while (n-- > 0) crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

// --- Shifting a CRC over runs of zero bytes, to combine interleaved streams ----------
//
// A CRC register is a vector over GF(2); appending a zero bit is a linear operator, so
// appending `len` zero bytes is a 32x32 matrix, squared up from the one-bit operator.
// Applying it byte by byte through four 256-entry tables costs four lookups.

std::uint32_t gf2_times(const std::uint32_t* mat, std::uint32_t vec) {
  std::uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat) {
    if (vec & 1) sum ^= *mat;
  }
  return sum;
}

void gf2_square(std::uint32_t* square, const std::uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

// The operator that appends `len` zero bytes (len a power of two).
void zeros_operator(std::uint32_t* even, std::size_t len) {
  std::uint32_t odd[32];
  odd[0] = kPoly;  // one zero bit
  std::uint32_t row = 1;
  for (int n = 1; n < 32; ++n, row <<= 1) odd[n] = row;
  gf2_square(even, odd);  // two zero bits
  gf2_square(odd, even);  // four zero bits
  // The first square gives one zero byte (eight bits) in `even`, the next two bytes in
  // `odd`, and so on until len is used up.
  do {
    gf2_square(even, odd);
    len >>= 1;
    if (len == 0) return;
    gf2_square(odd, even);
    len >>= 1;
  } while (len != 0);
  std::memcpy(even, odd, sizeof odd);
}

struct ShiftTables {
  std::uint32_t t[4][256];
  explicit ShiftTables(std::size_t len) {
    std::uint32_t op[32];
    zeros_operator(op, len);
    for (std::uint32_t n = 0; n < 256; ++n) {
      t[0][n] = gf2_times(op, n);
      t[1][n] = gf2_times(op, n << 8);
      t[2][n] = gf2_times(op, n << 16);
      t[3][n] = gf2_times(op, n << 24);
    }
  }
  std::uint32_t shift(std::uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

constexpr std::size_t kLong = 8192;
constexpr std::size_t kShort = 256;

// Three streams of `block` bytes at p, p + block, p + 2 block, combined into crc.
__attribute__((target("sse4.2"))) std::uint64_t three_streams(const unsigned char*& p,
                                                              std::size_t block,
                                                              const ShiftTables& shift,
                                                              std::uint64_t crc0) {
  std::uint64_t crc1 = 0;
  std::uint64_t crc2 = 0;
  const unsigned char* end = p + block;
  do {
    std::uint64_t w0, w1, w2;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + block, 8);
    std::memcpy(&w2, p + 2 * block, 8);
    crc0 = _mm_crc32_u64(crc0, w0);
    crc1 = _mm_crc32_u64(crc1, w1);
    crc2 = _mm_crc32_u64(crc2, w2);
    p += 8;
  } while (p < end);
  crc0 = shift.shift(static_cast<std::uint32_t>(crc0)) ^ crc1;
  crc0 = shift.shift(static_cast<std::uint32_t>(crc0)) ^ crc2;
  p += 2 * block;
  return crc0;
}

__attribute__((target("sse4.2"))) std::uint32_t hardware(const unsigned char* p, std::size_t n,
                                                         std::uint32_t crc) {
  static const ShiftTables long_shift(kLong);
  static const ShiftTables short_shift(kShort);
  std::uint64_t c = crc;
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
    --n;
  }
  for (; n >= 3 * kLong; n -= 3 * kLong) c = three_streams(p, kLong, long_shift, c);
  for (; n >= 3 * kShort; n -= 3 * kShort) c = three_streams(p, kShort, short_shift, c);
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  while (n-- > 0) c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
  return static_cast<std::uint32_t>(c);
}

const bool kHardware = __builtin_cpu_supports("sse4.2");

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::uint32_t c = ~crc;
  return ~(kHardware ? hardware(p, data.size(), c) : software(p, data.size(), c));
}

std::uint32_t crc32c_software(std::span<const std::byte> data, std::uint32_t crc) {
  return ~software(reinterpret_cast<const unsigned char*>(data.data()), data.size(), ~crc);
}

bool crc32c_hardware() { return kHardware; }

}  // namespace tributary
