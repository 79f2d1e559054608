// The wire side of the compressed collectives: tags, pieces, and the Exchange that
// sends and receives size-prefixed payloads over a Link. The protocol is in
// docs/compression.md, "Compressed collectives".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/in_flight.h"
#include "algorithms/link.h"
#include "algorithms/partition.h"
#include "compression/codec.h"
#include "compression/collectives/compressed_all_reduce.h"
#include "core/clock.h"
#include "core/status.h"

namespace tributary::compression::collectives {

constexpr std::uint32_t kStage1 = 1;       // reduce-scatter payloads (to the owner)
constexpr std::uint32_t kStage2 = 2;       // all-gather payloads (from the owner)
constexpr std::uint32_t kStageSparse = 3;  // top-k all-gather payloads
constexpr std::size_t kMaxPieces = std::size_t{1} << 28;

// slot = stage (3 bits) | piece (28 bits) | 0 size word / 1 payload.
algorithms::Tag make_tag(std::uint64_t seq, std::uint32_t check, std::uint32_t stage,
                         std::size_t piece, bool payload);

// Tag::check of a call: FNV-1a over ("compressed_all_reduce", the canonical plan spec,
// count, op, step, n), so that ranks that disagree on any of those fail with kMismatch.
std::uint32_t descriptor_check(const CompressionPlan& plan, std::size_t count, ReduceOp op,
                               std::uint64_t step, int n);

// The pieces a range is sent in: at most `per_piece` elements each, one piece for an
// empty range (every rank then still exchanges one message per pair, so a rank with an
// empty slice cannot return while its peers wait).
std::size_t num_pieces(algorithms::Range range, std::size_t per_piece);
algorithms::Range piece_of(algorithms::Range range, std::size_t per_piece, std::size_t p);

// Messages of one collective: payloads preceded by a u64 size word (payload sizes vary
// with zstd and top-k, and a Link receive must name its exact size). Owns nothing the
// caller sends: payload buffers stay with the caller until drain().
class Exchange {
 public:
  Exchange(algorithms::Link& link, std::uint64_t seq, std::uint32_t check, Deadline deadline,
           CompressionStats* stats);

  Status send(int peer, std::uint32_t stage, std::size_t piece, std::span<const std::byte> payload);

  // A receive of one payload: post() its size word early, then start_payload() and
  // finish_payload().
  struct Incoming {
    int peer = -1;
    std::uint32_t stage = 0;
    std::size_t piece = 0;
    std::uint64_t size_word = 0;
    algorithms::Link::Handle size_handle = 0;
    algorithms::Link::Handle payload_handle = 0;
    std::vector<std::byte>* bytes = nullptr;  // where the payload lands (scratch)
  };
  // incoming[peer][piece]; the caller's own row stays empty.
  using Incomings = std::vector<std::vector<Incoming>>;

  void post(Incoming& in);
  // Posts the size-word receives of `peer`'s pieces 0..pieces-1 of `stage` into `in`,
  // their payloads to land in scratch buffers.
  void post_pieces(CompressionState::Scratch& scratch, int peer, std::uint32_t stage,
                   std::size_t pieces, std::vector<Incoming>& in);
  // Waits for the size word, bounds it by `max_bytes`, and posts the payload receive.
  Status start_payload(Incoming& in, std::size_t max_bytes);
  Status finish_payload(Incoming& in);
  Status drain();

  // Piece p of every rank's payload, summed into dst[0..count) in rank order 0..n-1
  // (decode, then decode-accumulate) in float32, this rank's from `own`: every rank does
  // the same float operations in the same order. Waits for each peer's payload in turn,
  // all of them bounded by the codec's max_encoded_bytes(count).
  Status sum_piece(const Codec& codec, Incomings& in, std::size_t p, std::span<const std::byte> own,
                   float* dst, std::size_t count);

  // A decode error is a bad frame from a peer: fatal to the link like any other error.
  Status fail(Status s);

 private:
  algorithms::Link& link_;
  std::uint64_t seq_;
  std::uint32_t check_;
  Deadline deadline_;
  algorithms::SendWindow sends_;
  std::vector<std::unique_ptr<std::uint64_t>> out_words_;  // stable addresses
  CompressionStats* stats_;
};

}  // namespace tributary::compression::collectives
