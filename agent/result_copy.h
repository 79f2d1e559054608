// The private copy a member keeps of a small all-reduce it returned without the agreement
// round (docs/fault-tolerance.md, "Small all-reduces: speculative return"): until a later
// collective proves that every member holds that result, a member that lacks it after a
// failure can be repaired from the copy, bit for bit, with the outcome it would have had.
// Pure: the copy, and the blob the repair step broadcasts; the worker runs the repair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace tributary::agent {

struct ResultCopy {
  bool held = false;                       // false: no copy (the vectors keep their capacity)
  std::uint64_t seq = 0;                   // the collective
  std::uint64_t epoch = 0;                 // the epoch whose members produced it
  std::vector<std::uint64_t> contributors; // their member ids, by rank
  std::vector<std::byte> bytes;            // the result

  void keep(std::uint64_t s, std::uint64_t e, std::vector<std::uint64_t> ids,
            std::span<const std::byte> result) {
    held = true;
    seq = s;
    epoch = e;
    contributors = std::move(ids);
    bytes.assign(result.begin(), result.end());
  }
  // A completion proved that every member holds every result before `seq`.
  void drop_before(std::uint64_t s) {
    if (held && seq < s) held = false;
  }
};

// The repair step's broadcast: epoch, contributor ids and result bytes, little-endian
// integers. decode_result_copy checks every length against the blob's size.
std::vector<std::byte> encode_result_copy(const ResultCopy& copy);
Status decode_result_copy(std::span<const std::byte> blob, std::uint64_t seq, ResultCopy& out);

}  // namespace tributary::agent
