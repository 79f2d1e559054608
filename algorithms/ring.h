// Ring reduce-scatter and all-gather over arbitrary per-rank blocks: the engine behind
// ring all_reduce, reduce_scatter() and all_gather().
//
// Block b of the vector is described by blocks[b] (element ranges; may be empty). In the
// reduce-scatter, block b is reduced in the fixed order x[b+1], x[b+2], ..., x[b] (ring
// order starting after its owner) and ends on rank b; in the all-gather, rank b's block
// travels around the ring unchanged. Each step is cut into chunks and pipelined:
// receives are posted ahead (all of them where they land in place), and sends stay in
// flight in `sends` (the caller drains it before writing any buffer they read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/in_flight.h"
#include "algorithms/partition.h"

namespace tributary::algorithms {

// Slots one ring phase uses: (size - 1) steps of at most this many chunks.
std::uint64_t ring_phase_slots(const std::vector<Range>& blocks, std::size_t per_chunk);

// Called with (chunk index, absolute element range) as each chunk of the own block
// becomes final, in chunk order, so the next phase can start on it at once.
using OwnedChunkFn = std::function<Status(std::size_t chunk, Range range)>;

// `mine` is this rank's contribution, indexed by the block ranges. Reduced partials of
// blocks this rank forwards go to `partials` (indexed like `mine`) or, when it is null,
// to an internal scratch pool; the fully reduced own block goes to `owned_out`.
// `mine` may equal `partials`, and `owned_out` may equal mine + blocks[rank].begin.
Status ring_reduce_scatter(const ReduceJob& job, const std::vector<Range>& blocks,
                           const std::byte* mine, std::byte* partials, std::byte* owned_out,
                           std::uint64_t slot_base, SendWindow& sends,
                           const OwnedChunkFn& on_owned = {});

// The all-gather half: construction posts every receive (each lands in its final
// place in `out`, indexed by the block ranges), so it can be built before the data it
// waits for exists; run() sends this rank's block from `own` and forwards the others.
// Does not write out's own block. After an error the link is aborted (in_flight.h), so
// receives left posted never touch `out` again.
class RingAllGather {
 public:
  RingAllGather(const ReduceJob& job, const std::vector<Range>& blocks, std::byte* out,
                std::uint64_t slot_base);
  // Sends chunk `chunk` of the own block (starting at `own`) early; chunks must come in
  // order. run() sends those not sent yet.
  Status send_own(std::size_t chunk, const std::byte* own, SendWindow& sends);
  Status run(const std::byte* own, SendWindow& sends);

 private:
  struct Posted {
    int step;
    std::size_t chunk;
    Range range;
    Link::Handle handle;
  };
  Tag tag(int step, std::size_t chunk) const;

  const ReduceJob& job_;
  const std::vector<Range>& blocks_;
  std::byte* out_;
  std::uint64_t slot_base_;
  std::uint64_t stride_;
  std::size_t own_sent_ = 0;  // own-block chunks already sent
  std::vector<Posted> posted_;
};

}  // namespace tributary::algorithms
