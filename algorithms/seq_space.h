// How one epoch's sequence numbers are shared out.
//
// Every collective on a Link carries a 64-bit seq in its tags (link.h), and two messages
// with the same (peer, seq, slot) are matched in order. The agent numbers its callers'
// collectives 1, 2, 3, ... (equal on every member); a call may run collectives of its own
// on the same links (the commit round, a codec's internal all-reduces), and those must
// never match a caller's messages. So the top byte of seq names the space and the low 56
// bits carry the caller's seq that the internal collective belongs to.
#pragma once

#include <cstdint>

namespace tributary::algorithms {

enum class SeqSpace : std::uint8_t {
  kCaller = 0x00,            // the agent's collectives: seq < kCallerSeqLimit
  kAgreement = 0x80,         // the commit round after a caller's collective
  kRepair = 0x88,            // the repair step after a view change: 2 x the epoch (+1)
  kLinkProbe = 0x90,         // measuring an epoch's links (link_probe.h): 2 x the epoch (+1)
  kPairProbe = 0x92,         // measuring every pair, to order the ring: 2 x the epoch (+1)
  kPairReuse = 0x93,         // agreeing to reuse the last pair measurement: the epoch
  kCompressedDense = 0xC1,   // compression: PowerSGD's P all-reduce
  kCompressedStage2 = 0xC2,  // compression: stage-2 / PowerSGD's Q all-reduce
  kCompressedPlain = 0xC3,   // compression: the uncompressed float32 fallback
  kFederated = 0xF0,         // a federated round's weighted sum: the round number (< 2^56)
  // Not a collective's: the failover link's own messages on its paths (transport/
  // failover_link.h), its payloads after a move (0xFE) and its controls (0xFF). A caller's
  // seq never has either top byte, so the failover link can send callers' messages on its
  // paths under their own tags beside them.
  kFailoverPayload = 0xFE,
  kFailoverControl = 0xFF,
};

// A hierarchical all-reduce's cross-zone phase flips the top byte of its collective's seq
// by 0xA0 (algorithms/hierarchical.h, cross_zone_seq): 0x00 -> 0xA0, 0xC1..0xC3 ->
// 0x61..0x63, none of them a space above. (A federated round's sum is flat: no cross-zone
// phase.)
inline constexpr unsigned kSeqSpaceShift = 56;
inline constexpr std::uint64_t kCallerSeqLimit = std::uint64_t{1} << kSeqSpaceShift;

// The seq of the collective in `space` that belongs to caller collective `seq`.
constexpr std::uint64_t seq_in(SeqSpace space, std::uint64_t seq) {
  return (seq & (kCallerSeqLimit - 1)) |
         (std::uint64_t{static_cast<std::uint8_t>(space)} << kSeqSpaceShift);
}

}  // namespace tributary::algorithms
