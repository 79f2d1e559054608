// kQuantized: compressed reduce-scatter by pairwise exchange, the owner's re-encode, and
// a compressed all-gather (compressed_all_reduce.h; wire in docs/compression.md).
#include <algorithm>
#include <utility>
#include <vector>

#include "compression/collectives/exchange.h"
#include "compression/collectives/schemes.h"

namespace tributary::compression::collectives {

using algorithms::Range;

Status quantized_all_reduce(const SchemeCall& call) {
  const CompressionContext& ctx = call.ctx;
  const Codec& codec = *call.plan().codec;
  const bool ef = call.plan().error_feedback;
  // Momentum correction (sign) belongs to the worker's own stage-1 encode only; the owner
  // re-encodes a sum, which has no velocity. (The plan turns it off without ef.)
  const bool momentum = ef && codec.wants_momentum();
  const int n = call.link.size();
  const int r = call.link.rank();
  const auto un = static_cast<std::size_t>(n);
  float* const data = call.data;
  const std::size_t per_piece = std::min<std::size_t>(
      kMaxPayloadElements, algorithms::chunk_elements(call.options.chunk_bytes, 4));
  Exchange ex(call.link, call.options.seq, call.check, call.options.deadline, ctx.stats);
  CompressionState::Scratch& sc = call.scratch;

  std::vector<Range> slice(un);
  for (int j = 0; j < n; ++j)
    slice[static_cast<std::size_t>(j)] = algorithms::balanced_part(call.count, n, j);
  const Range mine = slice[static_cast<std::size_t>(r)];
  const std::size_t my_pieces = num_pieces(mine, per_piece);
  if (num_pieces(slice[0], per_piece) > kMaxPieces) {
    return error(StatusCode::kInvalidArgument, "compressed_all_reduce: too many pieces");
  }

  // Post every size-word receive up front: stage 1 (my slice from every peer) and stage 2
  // (every other owner's slice).
  Exchange::Incomings in1(un), in2(un);
  for (int i = 0; i < n; ++i) {
    if (i == r) continue;
    const auto ui = static_cast<std::size_t>(i);
    ex.post_pieces(sc, i, kStage1, my_pieces, in1[ui]);
    ex.post_pieces(sc, i, kStage2, num_pieces(slice[ui], per_piece), in2[ui]);
  }

  // `residual` (and `velocity`) are the piece's, handed out (and saved) by the attempt.
  auto encode = [&](const float* src, Range piece, std::span<float> residual, std::uint32_t stage,
                    std::vector<std::byte>& out, std::span<float> velocity = {}) -> Status {
    out.resize(codec.max_encoded_bytes(piece.count));
    EncodeOptions eo = encode_options(ctx, stage, r, piece.begin);
    eo.residual = residual;
    eo.momentum = velocity;
    TRIB_ASSIGN_OR_RETURN(const std::size_t bytes,
                          codec.encode(src, DType::kFloat32, piece.count, out, eo));
    out.resize(bytes);
    return Status::ok();
  };

  // Stage 1 and the owner's work, interleaved. Round p encodes piece p of every slice
  // (owners r+1, ..., r+n-1, then our own) and sends each to its owner, so every peer
  // receives our share of its slice from the start; then, kOwnerLag rounds behind, the
  // owner decode-accumulates the n payloads of its piece p - kOwnerLag in rank order,
  // re-encodes the reduced piece once (stage 2) and sends it to every peer. The lag keeps
  // pieces queued on every link while the owner waits for its peers' payloads (they
  // encode in the same order), so stage 2 rides the wire during stage 1 instead of after
  // the whole tensor is encoded. No deadlock: a rank only waits for a piece that a rank
  // in an earlier round has already sent. `data` of our slice's piece q is overwritten
  // (its result) only after round q encoded it; other slices only after the loop.
  constexpr std::size_t kOwnerLag = 2;
  std::vector<std::vector<std::vector<std::byte>*>> sent1(un);
  std::size_t rounds = 0;
  for (std::size_t j = 0; j < un; ++j) {
    sent1[j].resize(num_pieces(slice[j], per_piece));
    rounds = std::max(rounds, sent1[j].size());
  }
  sc.reduced.resize(mine.count);  // scratch: each element decoded before accumulated
  std::vector<std::vector<std::byte>*> sent2(my_pieces);
  auto own_piece = [&](std::size_t p) -> Status {
    const Range piece = piece_of(mine, per_piece, p);
    const Range local{piece.begin - mine.begin, piece.count};
    float* dst = sc.reduced.data() + local.begin;
    TRIB_RETURN_IF_ERROR(
        ex.sum_piece(codec, in1, p, *sent1[static_cast<std::size_t>(r)][p], dst, piece.count));
    sent2[p] = &sc.next_bytes();
    const std::span<float> residual =
        ef ? call.attempt->owner_residual(local.begin, local.count) : std::span<float>();
    Status s = encode(dst, piece, residual, kStage2, *sent2[p]);
    if (!s.is_ok()) return ex.fail(std::move(s));
    for (int k = 1; k < n; ++k) TRIB_RETURN_IF_ERROR(ex.send((r + k) % n, kStage2, p, *sent2[p]));
    s = codec.decode(*sent2[p], data + piece.begin, piece.count);
    if (!s.is_ok()) return ex.fail(std::move(s));
    finish_op(data + piece.begin, piece.count, call.op, n);
    return Status::ok();
  };
  std::size_t owned = 0;  // owner pieces done
  for (std::size_t p = 0; p < rounds; ++p) {
    for (int k = 1; k <= n; ++k) {
      const int owner = (r + k) % n;
      const auto uo = static_cast<std::size_t>(owner);
      if (p >= sent1[uo].size()) continue;
      const Range piece = piece_of(slice[uo], per_piece, p);
      sent1[uo][p] = &sc.next_bytes();
      const std::span<float> residual =
          ef ? call.attempt->worker_residual(piece.begin, piece.count) : std::span<float>();
      const std::span<float> velocity =
          momentum ? call.attempt->worker_momentum(piece.begin, piece.count) : std::span<float>();
      Status s = encode(data + piece.begin, piece, residual, kStage1, *sent1[uo][p], velocity);
      if (!s.is_ok()) return ex.fail(std::move(s));
      if (owner != r) TRIB_RETURN_IF_ERROR(ex.send(owner, kStage1, p, *sent1[uo][p]));
    }
    if (p >= kOwnerLag && owned < my_pieces) TRIB_RETURN_IF_ERROR(own_piece(owned++));
  }
  while (owned < my_pieces) TRIB_RETURN_IF_ERROR(own_piece(owned++));

  // Stage 2 receive: every other owner's reduced slice, decoded into `data` as it arrives
  // (so decoding overlaps the transfer of later pieces). Every rank decodes every slice
  // from the same bytes, the owner its own stage-2 bytes.
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    const auto uj = static_cast<std::size_t>(j);
    for (std::size_t p = 0; p < in2[uj].size(); ++p) {
      const Range piece = piece_of(slice[uj], per_piece, p);
      Exchange::Incoming& in = in2[uj][p];
      TRIB_RETURN_IF_ERROR(ex.start_payload(in, codec.max_encoded_bytes(piece.count)));
      TRIB_RETURN_IF_ERROR(ex.finish_payload(in));
      Status s = codec.decode(*in.bytes, data + piece.begin, piece.count);
      if (!s.is_ok()) return ex.fail(std::move(s));
      finish_op(data + piece.begin, piece.count, call.op, n);
    }
  }
  TRIB_RETURN_IF_ERROR(ex.drain());
  if (ctx.stats) ctx.stats->quantizations = 2;
  return Status::ok();
}

}  // namespace tributary::compression::collectives
