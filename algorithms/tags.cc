#include "algorithms/tags.h"

namespace tributary::algorithms {

std::uint32_t family_check(Family family, std::uint8_t variant, std::size_t count, DType dtype,
                           ReduceOp op) {
  std::uint32_t h = 2166136261u;
  auto mix = [&h](std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      h ^= static_cast<std::uint8_t>(v >> (8 * i));
      h *= 16777619u;
    }
  };
  mix(static_cast<std::uint8_t>(family), 1);
  mix(variant, 1);
  mix(static_cast<std::uint64_t>(count), 8);
  mix(static_cast<std::uint8_t>(dtype), 1);
  mix(static_cast<std::uint8_t>(op), 1);
  return h;
}

}  // namespace tributary::algorithms
