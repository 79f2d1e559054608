// How a vector of elements is cut into per-rank blocks and per-message chunks.
//
// Every function here is a pure function of values all ranks agree on (count, number of
// parts, chunk size), so every rank derives the same schedule and the same message sizes
// without talking. Ranges are in elements, never bytes.
#pragma once

#include <algorithm>
#include <cstddef>

namespace tributary::algorithms {

struct Range {
  std::size_t begin = 0;
  std::size_t count = 0;
  std::size_t end() const { return begin + count; }
};

// Part `index` of `parts` near-equal parts of [0, count): the first count % parts parts
// get one element more, so sizes differ by at most one and empty parts come last.
inline Range balanced_part(std::size_t count, int parts, int index) {
  const auto p = static_cast<std::size_t>(parts);
  const auto i = static_cast<std::size_t>(index);
  const std::size_t base = count / p;
  const std::size_t extra = count % p;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

// Elements per chunk for a chunk size in bytes: at least one element, so a chunk size
// smaller than an element still makes progress.
inline std::size_t chunk_elements(std::size_t chunk_bytes, std::size_t element_size) {
  return std::max<std::size_t>(1, chunk_bytes / element_size);
}

inline std::size_t num_chunks(std::size_t count, std::size_t per_chunk) {
  return (count + per_chunk - 1) / per_chunk;
}

// Chunk `c` of `range` (absolute element indices).
inline Range chunk_of(Range range, std::size_t per_chunk, std::size_t c) {
  const std::size_t begin = c * per_chunk;
  return {range.begin + begin, std::min(per_chunk, range.count - begin)};
}

inline int floor_log2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

}  // namespace tributary::algorithms
