// Counter-based random bits for stochastic rounding and sampling: a pure function of
// (key, element index), so any thread, any chunking, any CPU clone and the CUDA kernels
// draw the same bits for the same element without sharing state.
//
// Definition (docs/compression.md, "Counter RNG"; the GPU port must match it bit for bit):
//   splitmix64(z): z += 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//                  z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31)
//   key(seed, stream, step, rank) = k where
//       k = splitmix64(seed); k = splitmix64(k ^ stream); k = splitmix64(k ^ step);
//       k = splitmix64(k ^ rank); k0 = low 32 bits of k, k1 = high 32 bits
//   lowbias32(x): x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B;
//                 x ^= x >> 16  (all uint32, wrapping)
//   bits(e) = lowbias32(lowbias32(lo32(e) ^ k0) ^ k1 ^ hi32(e))     e: uint64 index
//   uniform(e) = float(bits(e) >> 8) * 2^-24                           in [0, 1)
// lowbias32 is a bijection on 32 bits (Wellons' hash-prospector), so within one key and
// one hi32 the bits never repeat; each word is two multiplies and six shifts/xors, which
// vectorise in 32-bit lanes (vpmulld) and cost a few instructions per element on a GPU.
#pragma once

#include <cstdint>

namespace tributary::compression {

constexpr std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr std::uint32_t lowbias32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

struct RngKey {
  std::uint32_t k0 = 0;
  std::uint32_t k1 = 0;
};

constexpr RngKey rng_key(std::uint64_t seed, std::uint64_t stream, std::uint64_t step,
                         std::uint32_t rank) {
  std::uint64_t k = splitmix64(seed);
  k = splitmix64(k ^ stream);
  k = splitmix64(k ^ step);
  k = splitmix64(k ^ rank);
  return {static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32)};
}

// The loops pass lo32/hi32 separately so that the inner loop runs in 32-bit lanes.
constexpr std::uint32_t rng_bits(RngKey key, std::uint32_t lo, std::uint32_t hi) {
  return lowbias32(lowbias32(lo ^ key.k0) ^ key.k1 ^ hi);
}
constexpr std::uint32_t rng_bits(RngKey key, std::uint64_t index) {
  return rng_bits(key, static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32));
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
inline float rng_uniform(std::uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

}  // namespace tributary::compression
