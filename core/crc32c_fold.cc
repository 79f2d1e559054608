// The folding of crc32c_fold.h. Polynomials are in the reflected representation CRC-32C
// uses (bit i of a w-bit word is the coefficient of x^(w-1-i)); in that representation a
// carry-less product of a 64-bit and a 32-bit value is the 128-bit representation of the
// product times x^33, and crc32 over a 64-bit word w from register 0 is w * x^32 mod P.
// Every constant below is x^e mod P for the exponent that makes those line up, computed at
// start-up rather than written out.
//
// A block of k strides is read as two parts: 128k bytes folded in 8 lanes of 16 bytes
// (each lane moved 1024 bits forward per stride: H * x^(1024+64) + L * x^1024, where H and
// L are its two halves), and after them 32k bytes through the crc32 instruction from
// register 0, in the same loop so that both units work at once. The folded part ends as
// one 128-bit value V, congruent to the part's message; its register is V * x^32 mod P,
// two crc32 steps. The two registers combine as reg(A) * x^(8 |B|) + reg(B).
#include "core/crc32c_fold.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace tributary::crc32c_fold {
namespace {

constexpr std::uint32_t kPolyReflected = 0x82F63B78u;
constexpr int kLanes = 8;
constexpr std::size_t kFoldBytes = 16 * kLanes;  // per stride
constexpr int kCrcWords = 4;
constexpr std::size_t kCrcBytes = 8 * kCrcWords;  // per stride
constexpr std::size_t kStride = kFoldBytes + kCrcBytes;
constexpr int kMaxStrides = 64;  // a block: 10 KiB

// x^n mod P.
std::uint32_t x_pow(std::uint64_t n) {
  std::uint32_t r = 0x80000000u;  // x^0
  for (std::uint64_t i = 0; i < n; ++i) r = (r >> 1) ^ ((r & 1u) != 0 ? kPolyReflected : 0u);
  return r;
}

struct Constants {
  // {for H, for L} of a lane moved forward by all lanes (one stride), and by one lane.
  std::uint64_t stride_h, stride_l, lane_h, lane_l;
  // shift[k]: x^(8 * 32k - 33), to move a register over the crc32 part of a k-stride block.
  std::array<std::uint64_t, kMaxStrides + 1> shift{};
};

Constants make_constants() {
  Constants c{};
  constexpr std::uint64_t kStrideBits = 128 * kLanes;
  c.stride_h = x_pow(kStrideBits + 64 - 33);
  c.stride_l = x_pow(kStrideBits - 33);
  c.lane_h = x_pow(128 + 64 - 33);
  c.lane_l = x_pow(128 - 33);
  for (int k = 1; k <= kMaxStrides; ++k) c.shift[k] = x_pow(8 * kCrcBytes * k - 33);
  return c;
}

const Constants& constants() {
  static const Constants c = make_constants();
  return c;
}

__attribute__((target("sse4.2,pclmul"))) inline __m128i fold_lane(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("sse4.2,pclmul"))) inline __m128i load(const std::byte* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

__attribute__((target("sse4.2,pclmul"))) inline std::uint64_t crc_words(const std::byte* p,
                                                                        std::uint64_t r) {
  for (int i = 0; i < kCrcWords; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    r = _mm_crc32_u64(r, w);
  }
  return r;
}

// One block of `strides` (2..kMaxStrides) strides from register `reg`.
__attribute__((target("sse4.2,pclmul"))) std::uint32_t block(const std::byte* p, int strides,
                                                             std::uint32_t reg,
                                                             const Constants& c) {
  const std::byte* f = p;
  const std::byte* s = p + kFoldBytes * static_cast<std::size_t>(strides);
  const __m128i k_stride =
      _mm_set_epi64x(static_cast<long long>(c.stride_l), static_cast<long long>(c.stride_h));
  __m128i x[kLanes];
  for (int l = 0; l < kLanes; ++l) x[l] = load(f + 16 * l);
  // The incoming register joins the message's first 32 bits.
  x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128(static_cast<int>(reg)));
  std::uint64_t r = crc_words(s, 0);
  for (int k = 1; k < strides; ++k) {
    f += kFoldBytes;
    s += kCrcBytes;
    for (int l = 0; l < kLanes; ++l)
      x[l] = _mm_xor_si128(fold_lane(x[l], k_stride), load(f + 16 * l));
    r = crc_words(s, r);
  }
  const __m128i k_lane =
      _mm_set_epi64x(static_cast<long long>(c.lane_l), static_cast<long long>(c.lane_h));
  __m128i v = x[0];
  for (int l = 1; l < kLanes; ++l) v = _mm_xor_si128(fold_lane(v, k_lane), x[l]);
  std::uint64_t folded = _mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(v)));
  folded = _mm_crc32_u64(folded, static_cast<std::uint64_t>(_mm_extract_epi64(v, 1)));
  const __m128i moved =
      _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(folded)),
                           _mm_cvtsi64_si128(static_cast<long long>(c.shift[strides])), 0x00);
  const std::uint64_t shifted =
      _mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(moved)));
  return static_cast<std::uint32_t>(shifted ^ r);
}

}  // namespace

bool supported() {
  return __builtin_cpu_supports("sse4.2") != 0 && __builtin_cpu_supports("pclmul") != 0;
}

Progress fold(const std::byte* data, std::size_t n, std::uint32_t reg) {
  const Constants& c = constants();
  Progress out{reg, 0};
  while (n - out.consumed >= 2 * kStride) {
    const std::size_t strides =
        std::min<std::size_t>((n - out.consumed) / kStride, static_cast<std::size_t>(kMaxStrides));
    out.reg = block(data + out.consumed, static_cast<int>(strides), out.reg, c);
    out.consumed += strides * kStride;
  }
  return out;
}

}  // namespace tributary::crc32c_fold
