// A tiny deterministic random source for the training library. The standard library's
// distributions and std::shuffle are allowed to differ between implementations, so
// splits, shards, batch orders and initial weights would not be reproducible across
// toolchains; these are defined bit for bit here (initial weights also pass through libm's
// log and cos, which another libm may round differently in the last bit).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace tributary::training {

// SplitMix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator; good enough for
// shuffles and weight init, and trivially seedable from any 64-bit value.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0, without modulo bias: reject the top sliver of the range that
  // does not divide evenly by n.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x = next();
    while (x >= limit) x = next();
    return x % n;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Standard normal by Box-Muller; one value per call keeps the stream simple to reason
  // about (no cached second value that would make the sequence depend on call history).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  // Fisher-Yates.
  template <typename T>
  void shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[below(i)]);
    }
  }

 private:
  std::uint64_t state_;
};

// Combines several seeds into one stream seed, so (seed, epoch, worker) triples that differ
// in any component give unrelated streams.
inline std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  Rng r(a);
  std::uint64_t h = r.next();
  r = Rng(h ^ b);
  h = r.next();
  r = Rng(h ^ c);
  return r.next();
}

}  // namespace tributary::training
