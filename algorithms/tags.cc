#include "algorithms/tags.h"

#include "core/hash.h"

namespace tributary::algorithms {

// The byte layout is wire protocol (agents of one cluster must compute equal checks): the
// all-reduce family hashes the algorithm right after the kind and has no root; the other
// collectives hash the root last. tests/algorithms/tags_test.cc pins the values.
std::uint32_t descriptor_check(const Descriptor& d) {
  const bool all_reduce_family = d.kind >= Collective::kAllReduce;
  Fnv1a32 h;
  h.add_le(static_cast<std::uint8_t>(d.kind), 1);
  if (all_reduce_family) h.add_le(d.algorithm, 1);
  h.add_le(static_cast<std::uint64_t>(d.count), 8);
  h.add_le(static_cast<std::uint8_t>(d.dtype), 1);
  h.add_le(static_cast<std::uint8_t>(d.op), 1);
  if (!all_reduce_family) h.add_le(static_cast<std::uint32_t>(d.root), 4);
  return h.value();
}

}  // namespace tributary::algorithms
