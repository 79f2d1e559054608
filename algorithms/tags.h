// Message tags for the all-reduce family (all_reduce, reduce_scatter, all_gather).
//
// A tag is (seq, slot, check). seq comes from the caller and is equal on every rank;
// slot names the step and chunk inside the collective so that no two messages of one
// collective between the same pair of ranks share a tag; check describes the collective
// (kind, algorithm, count, dtype, op). Two ranks that disagree on any of those compute
// different checks, so the first message between them fails with kMismatch instead of
// being reduced into a wrong answer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/link.h"
#include "core/dtype.h"

namespace tributary::algorithms {

enum class Family : std::uint8_t {
  kAllReduce = 0x41,
  kReduceScatter = 0x42,
  kAllGather = 0x43,
};

// FNV-1a over the descriptor. `variant` is the all-reduce algorithm (0 for the others):
// ranks that resolved kAuto differently must not exchange data either.
std::uint32_t family_check(Family family, std::uint8_t variant, std::size_t count, DType dtype,
                           ReduceOp op);

class TagMaker {
 public:
  TagMaker(std::uint64_t seq, std::uint32_t check) : seq_(seq), check_(check) {}
  // Slots are computed in 64 bits and wrap to 32: a wrapped collision can only pair
  // messages on the same ordered (sender, receiver) channel, whose messages every
  // algorithm here sends and receives in the same order, so FIFO matching still pairs
  // them correctly.
  Tag at(std::uint64_t slot) const { return {seq_, static_cast<std::uint32_t>(slot), check_}; }
  std::uint32_t check() const { return check_; }

 private:
  std::uint64_t seq_;
  std::uint32_t check_;
};

}  // namespace tributary::algorithms
