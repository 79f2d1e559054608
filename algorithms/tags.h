// How a collective's messages are tagged.
//
// A tag is (seq, slot, check) (link.h). seq comes from the caller and is equal on every
// rank; slot names the step and chunk inside the collective, so that no two messages of
// one collective between the same pair of ranks share a tag; check describes the
// collective. Two ranks that disagree on the kind, count, dtype, op, root or all-reduce
// algorithm compute different checks (up to a 32-bit hash), so the first message between
// them fails with kMismatch instead of being reduced or stored into a wrong answer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/link.h"
#include "core/dtype.h"

namespace tributary::algorithms {

// The values are part of every check on the wire: never renumber them.
enum class Collective : std::uint8_t {
  kBroadcast = 1,
  kReduce = 2,
  kGather = 3,
  kScatter = 4,
  kAllToAll = 5,
  kBarrier = 6,
  kAllToAllV = 7,
  kAllReduce = 0x41,
  kReduceScatter = 0x42,
  kAllGather = 0x43,
};

// What the ranks of one collective must agree on. Fields a collective does not have keep
// their defaults (a barrier is just {.kind = Collective::kBarrier}).
struct Descriptor {
  Collective kind = Collective::kBarrier;
  std::size_t count = 0;
  DType dtype = DType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;                // broadcast, reduce, gather, scatter
  std::uint8_t algorithm = 0;  // all_reduce: what kAuto resolved to (ranks must agree)
};

// 32-bit FNV-1a over the descriptor, for Tag::check.
std::uint32_t descriptor_check(const Descriptor& descriptor);

class TagMaker {
 public:
  TagMaker(std::uint64_t seq, std::uint32_t check) : seq_(seq), check_(check) {}
  TagMaker(std::uint64_t seq, const Descriptor& descriptor)
      : TagMaker(seq, descriptor_check(descriptor)) {}
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
