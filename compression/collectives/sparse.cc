// kSparse: top-k payloads all-gathered piece by piece and summed in rank order, or
// densified and summed by a float32 all_reduce once the union gets dense
// (compressed_all_reduce.h; volumes in docs/compression.md).
#include <cstring>
#include <utility>
#include <vector>

#include "compression/codec_registry.h"
#include "compression/collectives/exchange.h"
#include "compression/collectives/schemes.h"

namespace tributary::compression::collectives {
namespace {

using algorithms::Range;

// Top-k selects and ships each run of this many elements on its own (the last may be
// shorter): the pieces pipeline selection, wire and summation, and each is summed while
// cache-resident. Part of the semantics (which elements are sent), so a constant.
constexpr std::size_t kSparsePieceElements = std::size_t{1} << 20;

// Our own payloads, densified in scratch (data is still the input on error), then summed.
Status densify_and_sum(const SchemeCall& call, Exchange& ex,
                       const std::vector<std::vector<std::byte>*>& own) {
  const Range all{0, call.count};
  std::vector<float>& out = call.scratch.result;
  out.resize(call.count);
  for (std::size_t p = 0; p < own.size(); ++p) {
    const Range piece = piece_of(all, kSparsePieceElements, p);
    Status s = call.plan().codec->decode(*own[p], out.data() + piece.begin, piece.count);
    if (!s.is_ok()) return ex.fail(std::move(s));
  }
  TRIB_RETURN_IF_ERROR(float32_all_reduce(call, algorithms::SeqSpace::kCompressedStage2, out.data(),
                                          out.data(), call.count, call.op));
  if (call.ctx.stats) call.ctx.stats->dense_fallback = true;
  if (call.count) std::memcpy(call.data, out.data(), call.count * sizeof(float));
  return Status::ok();
}

}  // namespace

Status sparse_all_reduce(const SchemeCall& call) {
  const CompressionPlan& plan = call.plan();
  const CompressionContext& ctx = call.ctx;
  const Codec& codec = *plan.codec;
  const int n = call.link.size();
  const int r = call.link.rank();
  const Range all{0, call.count};
  const std::size_t pieces = num_pieces(all, kSparsePieceElements);
  const bool ef = plan.error_feedback;
  const bool momentum = codec.wants_momentum();
  // The dense switch depends only on (plan, step, n), so every rank takes the same branch.
  const bool dense = topk_density_at(plan.codec_config, ctx.step) * n > plan.dense_threshold;

  Exchange ex(call.link, call.options.seq, call.check, call.options.deadline, ctx.stats);
  Exchange::Incomings in(static_cast<std::size_t>(n));
  if (!dense) {
    // Size-word receives for every (peer, piece) first, so nothing arrives unexpected.
    for (int i = 0; i < n; ++i) {
      if (i != r)
        ex.post_pieces(call.scratch, i, kStageSparse, pieces, in[static_cast<std::size_t>(i)]);
    }
  }
  // Each piece goes out as soon as it is encoded: the wire carries piece p while piece
  // p + 1 is being selected (the sockets take it without waiting for a progress call).
  std::vector<std::vector<std::byte>*> own(pieces);
  for (std::size_t p = 0; p < pieces; ++p) {
    const Range piece = piece_of(all, kSparsePieceElements, p);
    own[p] = &call.scratch.next_bytes();
    own[p]->resize(codec.max_encoded_bytes(piece.count));
    EncodeOptions eo = encode_options(ctx, CompressionState::kStageWorker, r, piece.begin);
    if (ef) eo.residual = call.attempt->worker_residual(piece.begin, piece.count);
    if (momentum) eo.momentum = call.attempt->worker_momentum(piece.begin, piece.count);
    Result<std::size_t> bytes =
        codec.encode(call.data + piece.begin, DType::kFloat32, piece.count, *own[p], eo);
    if (!bytes.is_ok()) return ex.fail(bytes.status());
    own[p]->resize(*bytes);
    if (!dense) {
      for (int k = 1; k < n; ++k)
        TRIB_RETURN_IF_ERROR(ex.send((r + k) % n, kStageSparse, p, *own[p]));
    }
  }
  if (ctx.stats) ctx.stats->quantizations = 1;
  if (dense) return densify_and_sum(call, ex, own);

  // Piece by piece, as the pieces arrive: sum in rank order 0..n-1 into `data` (fully
  // written by the first decode: a top-k decode writes every element), own contribution
  // from its own bytes, so every rank does the same float operations in the same order;
  // then average the piece while it is still in cache. Our own encode of every piece
  // precedes the first write into `data`.
  for (std::size_t p = 0; p < pieces; ++p) {
    const Range piece = piece_of(all, kSparsePieceElements, p);
    TRIB_RETURN_IF_ERROR(ex.sum_piece(codec, in, p, *own[p], call.data + piece.begin, piece.count));
    finish_op(call.data + piece.begin, piece.count, call.op, n);
  }
  return ex.drain();
}

}  // namespace tributary::compression::collectives
