// compressed_all_reduce(): plan parsing, the per-worker state, and the four schemes.
// The wire protocol (size words, tags, stage order) is in docs/compression.md,
// "Compressed collectives".
#include "compression/compressed_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "algorithms/in_flight.h"
#include "algorithms/partition.h"
#include "algorithms/seq_space.h"
#include "core/check.h"

namespace tributary::compression {
namespace {

using algorithms::Range;

// ---- plan parsing --------------------------------------------------------------------

Status bad_spec(std::string_view spec, const std::string& what) {
  return error(StatusCode::kInvalidArgument,
               "compression spec \"" + std::string(spec) + "\": " + what);
}

bool parse_bool(std::string_view v, bool* out) {
  if (v == "1" || v == "true" || v == "on") {
    *out = true;
    return true;
  }
  if (v == "0" || v == "false" || v == "off") {
    *out = false;
    return true;
  }
  return false;
}

bool parse_number(std::string_view v, double* out) {
  const std::string s(v);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return false;
  *out = d;
  return true;
}

// ---- wire helpers ----------------------------------------------------------------------

constexpr std::uint32_t kStage1 = 1;       // reduce-scatter payloads (to the owner)
constexpr std::uint32_t kStage2 = 2;       // all-gather payloads (from the owner)
constexpr std::uint32_t kStageSparse = 3;  // top-k all-gather payloads
constexpr std::size_t kMaxPieces = std::size_t{1} << 28;
// Top-k selects and ships each run of this many elements on its own (the last may be
// shorter): the pieces pipeline selection, wire and summation, and each is summed while
// cache-resident. Part of the semantics (which elements are sent), so a constant.
constexpr std::size_t kSparsePieceElements = std::size_t{1} << 20;

// slot = stage (3 bits) | piece (28 bits) | 0 size word / 1 payload.
algorithms::Tag make_tag(std::uint64_t seq, std::uint32_t check, std::uint32_t stage,
                         std::size_t piece, bool payload) {
  const auto slot = static_cast<std::uint32_t>((stage << 29) | (piece << 1) | (payload ? 1u : 0u));
  return {seq, slot, check};
}

std::uint32_t fnv1a(std::uint32_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

std::uint32_t descriptor_check(const CompressionPlan& plan, std::size_t count, ReduceOp op,
                               std::uint64_t step, int n) {
  std::uint32_t h = 2166136261u;
  h = fnv1a(h, "compressed_all_reduce", 21);
  h = fnv1a(h, plan.spec.data(), plan.spec.size());
  const std::uint64_t words[4] = {count, static_cast<std::uint64_t>(op), step,
                                  static_cast<std::uint64_t>(n)};
  return fnv1a(h, words, sizeof(words));
}

// The pieces a range is sent in: at most `per_piece` elements each, one piece for an
// empty range (every rank then still exchanges one message per pair, so a rank with an
// empty slice cannot return while its peers wait).
std::size_t num_pieces(Range range, std::size_t per_piece) {
  return std::max<std::size_t>(1, algorithms::num_chunks(range.count, per_piece));
}
Range piece_of(Range range, std::size_t per_piece, std::size_t p) {
  if (range.count == 0) return range;
  return algorithms::chunk_of(range, per_piece, p);
}

// Messages of one collective: payloads preceded by a u64 size word (payload sizes vary
// with zstd and top-k, and a Link receive must name its exact size). Owns nothing the
// caller sends: payload buffers stay with the caller until drain().
class Exchange {
 public:
  Exchange(algorithms::Link& link, std::uint64_t seq, std::uint32_t check, Deadline deadline,
           CompressionStats* stats)
      : link_(link),
        seq_(seq),
        check_(check),
        deadline_(deadline),
        // Every send of the call stays in flight (its buffer is the call's scratch
        // anyway): per-peer sockets then drain independently, so a slow peer does not
        // hold back sends to the others. A window of 64 cost 15% at 4 ranks on a
        // shaped link (bench/results/shaped_2026-11-21.md).
        sends_(link, deadline, std::size_t{1} << 16),
        stats_(stats) {}

  Status send(int peer, std::uint32_t stage, std::size_t piece,
              std::span<const std::byte> payload) {
    out_words_.push_back(std::make_unique<std::uint64_t>(payload.size()));
    const std::span<const std::byte> word(
        reinterpret_cast<const std::byte*>(out_words_.back().get()), sizeof(std::uint64_t));
    TRIB_RETURN_IF_ERROR(
        sends_.add(link_.send(peer, make_tag(seq_, check_, stage, piece, false), word)));
    TRIB_RETURN_IF_ERROR(
        sends_.add(link_.send(peer, make_tag(seq_, check_, stage, piece, true), payload)));
    if (stats_) {
      stats_->wire_bytes_sent += sizeof(std::uint64_t) + payload.size();
      stats_->messages_sent += 2;
    }
    return Status::ok();
  }

  // A receive of one payload: post() its size word early, then fetch() it.
  struct Incoming {
    int peer = -1;
    std::uint32_t stage = 0;
    std::size_t piece = 0;
    std::uint64_t size_word = 0;
    algorithms::Link::Handle size_handle = 0;
    algorithms::Link::Handle payload_handle = 0;
    std::vector<std::byte>* bytes = nullptr;  // where the payload lands (scratch)
  };
  void post(Incoming& in) {
    in.size_handle = link_.recv(
        in.peer, make_tag(seq_, check_, in.stage, in.piece, false),
        std::span<std::byte>(reinterpret_cast<std::byte*>(&in.size_word), sizeof(std::uint64_t)));
  }
  // Waits for the size word, bounds it by `max_bytes`, and posts the payload receive.
  Status start_payload(Incoming& in, std::size_t max_bytes) {
    TRIB_RETURN_IF_ERROR(algorithms::wait_or_abort(link_, in.size_handle, deadline_));
    if (in.size_word < kHeaderBytes || in.size_word > max_bytes) {
      Status s = error(StatusCode::kBadFrame,
                       "compressed_all_reduce: rank " + std::to_string(in.peer) +
                           " announced a payload of " + std::to_string(in.size_word) +
                           " bytes, outside [16, " + std::to_string(max_bytes) + "]");
      link_.abort(s);
      return s;
    }
    in.bytes->resize(static_cast<std::size_t>(in.size_word));
    in.payload_handle = link_.recv(in.peer, make_tag(seq_, check_, in.stage, in.piece, true),
                                   std::span<std::byte>(*in.bytes));
    return Status::ok();
  }
  Status finish_payload(Incoming& in) {
    return algorithms::wait_or_abort(link_, in.payload_handle, deadline_);
  }
  Status drain() { return sends_.drain(); }

  // A decode error is a bad frame from a peer: fatal to the link like any other error.
  Status fail(Status s) {
    link_.abort(s);
    return s;
  }

 private:
  algorithms::Link& link_;
  std::uint64_t seq_;
  std::uint32_t check_;
  Deadline deadline_;
  algorithms::SendWindow sends_;
  std::vector<std::unique_ptr<std::uint64_t>> out_words_;  // stable addresses
  CompressionStats* stats_;
};

std::uint64_t stream_of(std::uint64_t tensor, std::uint32_t stage) {
  return ErrorFeedback::key(tensor, stage);
}

// A stage's encode of the piece starting at `element_offset`: the counter RNG is keyed by
// (seed, tensor and stage, step, rank), the same on a re-run.
EncodeOptions encode_options(const CompressionContext& ctx, std::uint32_t stage, int rank,
                             std::size_t element_offset) {
  EncodeOptions eo;
  eo.seed = ctx.seed;
  eo.stream = stream_of(ctx.tensor_id, stage);
  eo.step = ctx.step;
  eo.rank = static_cast<std::uint32_t>(rank);
  eo.element_offset = element_offset;
  return eo;
}

// Posts the size-word receives of `peer`'s pieces 0..pieces-1 of `stage` into `in`.
void post_pieces(Exchange& ex, CompressionState::Scratch& sc, int peer, std::uint32_t stage,
                 std::size_t pieces, std::vector<Exchange::Incoming>& in) {
  in.resize(pieces);
  for (std::size_t p = 0; p < pieces; ++p) {
    in[p].peer = peer, in[p].stage = stage, in[p].piece = p, in[p].bytes = &sc.next_bytes();
    ex.post(in[p]);
  }
}

// kAvg: divide by n at the end (the same operation on the same bits on every rank).
void finish_op(float* out, std::size_t count, ReduceOp op, int n) {
  if (op != ReduceOp::kAvg || n == 1) return;
  const float fn = static_cast<float>(n);
  for (std::size_t i = 0; i < count; ++i) out[i] = out[i] / fn;
}

std::uint64_t ring_bytes(std::size_t count, int n) {
  return n <= 1 ? 0
                : 2 * static_cast<std::uint64_t>(n - 1) * count * sizeof(float) /
                      static_cast<std::uint64_t>(n);
}

// ---- kDense ------------------------------------------------------------------------------

Status dense_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                        const CompressionContext& ctx,
                        const algorithms::CollectiveOptions& options) {
  // Out of place into scratch, so that `data` is untouched on error.
  CompressionState::Scratch local;
  std::vector<float>& out = ctx.state ? ctx.state->scratch().result : local.result;
  out.resize(count);
  algorithms::CollectiveOptions o = options;
  o.seq = algorithms::seq_in(algorithms::SeqSpace::kCompressedPlain, options.seq);
  TRIB_RETURN_IF_ERROR(all_reduce(link, data, out.data(), count, DType::kFloat32, op, o));
  if (count) std::memcpy(data, out.data(), count * sizeof(float));
  if (ctx.stats) ctx.stats->wire_bytes_sent += ring_bytes(count, link.size());
  return Status::ok();
}

// ---- kQuantized --------------------------------------------------------------------------

Status quantized_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                            const CompressionContext& ctx,
                            const algorithms::CollectiveOptions& options, std::uint32_t check) {
  const CompressionPlan& plan = *ctx.plan;
  const Codec& codec = *plan.codec;
  const int n = link.size();
  const int r = link.rank();
  const auto un = static_cast<std::size_t>(n);
  const std::size_t per_piece = std::min<std::size_t>(
      kMaxPayloadElements, algorithms::chunk_elements(options.chunk_bytes, 4));
  Exchange ex(link, options.seq, check, options.deadline, ctx.stats);
  CompressionState::Scratch local;
  CompressionState::Scratch& sc = ctx.state ? ctx.state->scratch() : local;

  std::vector<Range> slice(un);
  for (int j = 0; j < n; ++j)
    slice[static_cast<std::size_t>(j)] = algorithms::balanced_part(count, n, j);
  const Range mine = slice[static_cast<std::size_t>(r)];
  const std::size_t my_pieces = num_pieces(mine, per_piece);
  if (num_pieces(slice[0], per_piece) > kMaxPieces) {
    return error(StatusCode::kInvalidArgument, "compressed_all_reduce: too many pieces");
  }

  // Post every size-word receive up front: stage 1 (my slice from every peer) and stage 2
  // (every other owner's slice).
  std::vector<std::vector<Exchange::Incoming>> in1(un), in2(un);
  for (int i = 0; i < n; ++i) {
    if (i == r) continue;
    const auto ui = static_cast<std::size_t>(i);
    post_pieces(ex, sc, i, kStage1, my_pieces, in1[ui]);
    post_pieces(ex, sc, i, kStage2, num_pieces(slice[ui], per_piece), in2[ui]);
  }

  // Stage-2 residual first: one left from another slice ownership is folded into the
  // stage-1 residual (policy) before stage 1 reads it.
  // Momentum correction (sign) belongs to the worker's own stage-1 encode only; the owner
  // re-encodes a sum, which has no velocity.
  std::span<float> residual1, residual2, momentum1;
  if (plan.error_feedback) {
    const std::uint64_t key1 = ErrorFeedback::key(ctx.tensor_id, CompressionState::kStageWorker);
    residual2 = ctx.state->owner_residual(ctx.tensor_id, count, n, r, mine.begin, mine.count);
    residual1 = ctx.state->worker().residual(key1, count);
    if (codec.wants_momentum()) momentum1 = ctx.state->worker().momentum(key1, count);
  }
  auto encode = [&](const float* src, Range piece, std::span<float> residual, std::uint32_t stage,
                    std::vector<std::byte>& out) -> Status {
    out.resize(codec.max_encoded_bytes(piece.count));
    EncodeOptions eo = encode_options(ctx, stage, r, piece.begin);
    eo.residual = residual;
    if (stage == kStage1 && !momentum1.empty()) {
      eo.momentum = momentum1.subspan(piece.begin, piece.count);
    }
    Result<std::size_t> bytes = codec.encode(src, DType::kFloat32, piece.count, out, eo);
    if (!bytes.is_ok()) return bytes.status();
    out.resize(*bytes);
    return Status::ok();
  };
  auto residual1_of = [&](Range piece) {
    return residual1.empty() ? std::span<float>() : residual1.subspan(piece.begin, piece.count);
  };

  // Stage 1: encode every slice once; send slice j to its owner (staggered order), keep
  // our own slice's payloads.
  std::vector<std::vector<std::vector<std::byte>*>> sent1(un);
  for (int k = 1; k <= n; ++k) {
    const int owner = (r + k) % n;
    const auto uo = static_cast<std::size_t>(owner);
    const std::size_t pieces = num_pieces(slice[uo], per_piece);
    sent1[uo].resize(pieces);
    for (std::size_t p = 0; p < pieces; ++p) {
      const Range piece = piece_of(slice[uo], per_piece, p);
      sent1[uo][p] = &sc.next_bytes();
      if (!residual1.empty()) {
        ctx.state->save_worker(piece.begin, piece.count, !momentum1.empty());
      }
      Status s = encode(data + piece.begin, piece, residual1_of(piece), kStage1, *sent1[uo][p]);
      if (!s.is_ok()) return ex.fail(std::move(s));
      if (owner != r) TRIB_RETURN_IF_ERROR(ex.send(owner, kStage1, p, *sent1[uo][p]));
    }
  }

  // The owner: per piece, wait for the n payloads, decode-accumulate them in rank order,
  // re-encode the reduced piece once (stage 2) and send it to every peer.
  // Scratch, every element written before it is read (decode, not accumulate, first).
  // From here on `data` is only written: stage 1 has encoded all of it.
  sc.reduced.resize(mine.count);
  float* const acc = sc.reduced.data();
  std::vector<std::vector<std::byte>*> sent2(my_pieces);
  for (std::size_t p = 0; p < my_pieces; ++p) {
    const Range piece = piece_of(mine, per_piece, p);
    for (int i = 0; i < n; ++i) {
      if (i == r) continue;
      auto& in = in1[static_cast<std::size_t>(i)][p];
      TRIB_RETURN_IF_ERROR(ex.start_payload(in, codec.max_encoded_bytes(piece.count)));
    }
    float* dst = acc + (piece.begin - mine.begin);
    for (int i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      if (i != r) TRIB_RETURN_IF_ERROR(ex.finish_payload(in1[ui][p]));
      const std::span<const std::byte> payload =
          i == r ? std::span<const std::byte>(*sent1[ui][p])
                 : std::span<const std::byte>(*in1[ui][p].bytes);
      Status s = i == 0 ? codec.decode(payload, dst, piece.count)
                        : codec.decode_accumulate(payload, dst, piece.count);
      if (!s.is_ok()) return ex.fail(std::move(s));
    }
    const Range local{piece.begin - mine.begin, piece.count};
    sent2[p] = &sc.next_bytes();
    if (!residual2.empty()) ctx.state->save_owner(local.begin, local.count);
    Status s =
        encode(dst, piece,
               residual2.empty() ? std::span<float>() : residual2.subspan(local.begin, local.count),
               kStage2, *sent2[p]);
    if (!s.is_ok()) return ex.fail(std::move(s));
    for (int k = 1; k < n; ++k) TRIB_RETURN_IF_ERROR(ex.send((r + k) % n, kStage2, p, *sent2[p]));
    s = codec.decode(*sent2[p], data + piece.begin, piece.count);
    if (!s.is_ok()) return ex.fail(std::move(s));
    finish_op(data + piece.begin, piece.count, op, n);
  }

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
      finish_op(data + piece.begin, piece.count, op, n);
    }
  }
  TRIB_RETURN_IF_ERROR(ex.drain());
  if (ctx.stats) ctx.stats->quantizations = 2;
  return Status::ok();
}

// ---- kSparse -------------------------------------------------------------------------------

Status sparse_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                         const CompressionContext& ctx,
                         const algorithms::CollectiveOptions& options, std::uint32_t check) {
  const CompressionPlan& plan = *ctx.plan;
  const Codec& codec = *plan.codec;
  const int n = link.size();
  const int r = link.rank();
  const auto un = static_cast<std::size_t>(n);
  const Range all{0, count};
  const std::size_t per_piece = kSparsePieceElements;
  const std::size_t pieces = num_pieces(all, per_piece);
  const std::uint64_t key = ErrorFeedback::key(ctx.tensor_id, CompressionState::kStageWorker);
  std::span<float> residual, momentum;
  if (plan.error_feedback) residual = ctx.state->worker().residual(key, count);
  if (codec.wants_momentum()) momentum = ctx.state->worker().momentum(key, count);
  // The dense switch depends only on (plan, step, n), so every rank takes the same branch.
  const bool dense = topk_density_at(plan.codec_config, ctx.step) * n > plan.dense_threshold;

  CompressionState::Scratch local;
  CompressionState::Scratch& sc = ctx.state ? ctx.state->scratch() : local;
  Exchange ex(link, options.seq, check, options.deadline, ctx.stats);
  std::vector<std::vector<Exchange::Incoming>> in(un);
  if (!dense) {
    // Size-word receives for every (peer, piece) first, so nothing arrives unexpected.
    for (int i = 0; i < n; ++i) {
      if (i != r) post_pieces(ex, sc, i, kStageSparse, pieces, in[static_cast<std::size_t>(i)]);
    }
  }
  // Each piece goes out as soon as it is encoded: the wire carries piece p while piece
  // p + 1 is being selected (the sockets take it without waiting for a progress call).
  std::vector<std::vector<std::byte>*> own(pieces);
  for (std::size_t p = 0; p < pieces; ++p) {
    const Range piece = piece_of(all, per_piece, p);
    own[p] = &sc.next_bytes();
    own[p]->resize(codec.max_encoded_bytes(piece.count));
    EncodeOptions eo = encode_options(ctx, CompressionState::kStageWorker, r, piece.begin);
    if (!residual.empty() || !momentum.empty()) {
      ctx.state->save_worker(piece.begin, piece.count, !momentum.empty());
    }
    if (!residual.empty()) eo.residual = residual.subspan(piece.begin, piece.count);
    if (!momentum.empty()) eo.momentum = momentum.subspan(piece.begin, piece.count);
    Result<std::size_t> bytes =
        codec.encode(data + piece.begin, DType::kFloat32, piece.count, *own[p], eo);
    if (!bytes.is_ok()) return ex.fail(bytes.status());
    own[p]->resize(*bytes);
    if (!dense) {
      for (int k = 1; k < n; ++k)
        TRIB_RETURN_IF_ERROR(ex.send((r + k) % n, kStageSparse, p, *own[p]));
    }
  }
  if (ctx.stats) ctx.stats->quantizations = 1;

  if (dense) {
    // Densify our own payload in scratch (data is still the input on error), then sum.
    sc.result.resize(count);
    float* const out = sc.result.data();
    for (std::size_t p = 0; p < pieces; ++p) {
      const Range piece = piece_of(all, per_piece, p);
      Status s = codec.decode(*own[p], out + piece.begin, piece.count);
      if (!s.is_ok()) return ex.fail(std::move(s));
    }
    algorithms::CollectiveOptions o = options;
    o.seq = algorithms::seq_in(algorithms::SeqSpace::kCompressedStage2, options.seq);
    TRIB_RETURN_IF_ERROR(all_reduce(link, out, out, count, DType::kFloat32, op, o));
    if (ctx.stats) {
      ctx.stats->dense_fallback = true;
      ctx.stats->wire_bytes_sent += ring_bytes(count, n);
    }
    if (count) std::memcpy(data, out, count * sizeof(float));
    return Status::ok();
  }

  // Piece by piece, as the pieces arrive: sum in rank order 0..n-1 into `data` (fully
  // written by the first decode: a top-k decode writes every element), own contribution
  // from its own bytes, so every rank does the same float operations in the same order;
  // then average the piece while it is still in cache. Our own encode of every piece
  // precedes the first write into `data`.
  for (std::size_t p = 0; p < pieces; ++p) {
    const Range piece = piece_of(all, per_piece, p);
    for (int i = 0; i < n; ++i) {
      if (i != r)
        TRIB_RETURN_IF_ERROR(ex.start_payload(in[static_cast<std::size_t>(i)][p],
                                              codec.max_encoded_bytes(piece.count)));
    }
    for (int i = 0; i < n; ++i) {
      if (i != r) TRIB_RETURN_IF_ERROR(ex.finish_payload(in[static_cast<std::size_t>(i)][p]));
    }
    for (int i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      const std::span<const std::byte> payload = i == r
                                                     ? std::span<const std::byte>(*own[p])
                                                     : std::span<const std::byte>(*in[ui][p].bytes);
      Status s = i == 0 ? codec.decode(payload, data + piece.begin, piece.count)
                        : codec.decode_accumulate(payload, data + piece.begin, piece.count);
      if (!s.is_ok()) return ex.fail(std::move(s));
    }
    finish_op(data + piece.begin, piece.count, op, n);
  }
  return ex.drain();
}

// ---- kPowerSgd ------------------------------------------------------------------------------

Status powersgd_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                           const CompressionContext& ctx,
                           const algorithms::CollectiveOptions& options) {
  PowerSgdParams params = ctx.plan->powersgd;
  params.seed = ctx.seed;
  Result<PowerSgd*> made = ctx.state->powersgd(ctx.tensor_id, count, ctx.shapes, params);
  if (!made.is_ok()) return made.status();
  PowerSgd& ps = **made;
  const int n = link.size();

  // [P | uncompressed elements] in one all-reduce, then Q: two rounds per step. Averages
  // (not sums) so that the residual M - P Q^T is measured against the mean, as in
  // Vogels et al.; kSum scales the result by n afterwards.
  std::vector<float> first(ps.p_count() + ps.dense_count());
  std::vector<float> q(ps.q_count());
  const std::span<float> p(first.data(), ps.p_count());
  const std::span<float> dense(first.data() + ps.p_count(), ps.dense_count());
  ps.compute_p(data, p);
  ps.pack_uncompressed(data, dense);
  algorithms::CollectiveOptions o = options;
  o.seq = algorithms::seq_in(algorithms::SeqSpace::kCompressedDense, options.seq);
  TRIB_RETURN_IF_ERROR(all_reduce(link, first.data(), first.data(), first.size(), DType::kFloat32,
                                  ReduceOp::kAvg, o));
  ps.orthogonalize(p);
  ps.compute_q(p, q);
  o.seq = algorithms::seq_in(algorithms::SeqSpace::kCompressedStage2, options.seq);
  TRIB_RETURN_IF_ERROR(
      all_reduce(link, q.data(), q.data(), q.size(), DType::kFloat32, ReduceOp::kAvg, o));
  std::vector<float> out(count);
  ps.reconstruct(p, q, dense, out.data());
  if (op == ReduceOp::kSum && n > 1) {
    const float fn = static_cast<float>(n);
    for (float& x : out) x = x * fn;
  }
  if (count) std::memcpy(data, out.data(), count * sizeof(float));
  if (ctx.stats) {
    ctx.stats->wire_bytes_sent += ring_bytes(first.size(), n) + ring_bytes(q.size(), n);
    ctx.stats->quantizations = 1;
  }
  return Status::ok();
}

}  // namespace

// ---- CompressionPlan -------------------------------------------------------------------------

Result<CompressionPlan> CompressionPlan::parse(std::string_view spec) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  std::string_view rest =
      colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  std::optional<bool> ef;
  std::optional<double> dense_at;
  PowerSgdParams psgd;
  std::string codec_keys;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    const std::string_view k = item.substr(0, eq);
    const std::string_view v =
        eq == std::string_view::npos ? std::string_view("1") : item.substr(eq + 1);
    bool b = false;
    double d = 0;
    if (k == "ef") {
      if (!parse_bool(v, &b)) return bad_spec(spec, "ef must be 0 or 1");
      ef = b;
    } else if (k == "dense_at") {
      if (!parse_number(v, &d) || !(d > 0)) return bad_spec(spec, "dense_at must be a number > 0");
      dense_at = d;
    } else if (name == "powersgd" && k == "rank") {
      if (!parse_number(v, &d) || d < 1 || d > 1024 ||
          d != static_cast<double>(static_cast<int>(d))) {
        return bad_spec(spec, "rank must be an integer in [1, 1024]");
      }
      psgd.rank = static_cast<std::uint32_t>(d);
    } else if (name == "powersgd" && k == "warm") {
      if (!parse_bool(v, &b)) return bad_spec(spec, "warm must be 0 or 1");
      psgd.warm_start = b;
    } else if (name == "powersgd") {
      return bad_spec(spec, "unknown key '" + std::string(k) + "' for powersgd");
    } else {
      if (!codec_keys.empty()) codec_keys.push_back(',');
      codec_keys.append(item);
    }
  }

  CompressionPlan plan;
  if (name == "powersgd") {
    if (dense_at) return bad_spec(spec, "dense_at applies to topk only");
    plan.kind = Kind::kPowerSgd;
    psgd.error_feedback = ef.value_or(true);
    plan.powersgd = psgd;
    plan.error_feedback = psgd.error_feedback;
    plan.spec = "powersgd:rank=" + std::to_string(psgd.rank) +
                ",ef=" + (psgd.error_feedback ? "1" : "0") +
                ",warm=" + (psgd.warm_start ? "1" : "0");
    return plan;
  }
  Result<CodecConfig> config =
      parse_codec_spec(std::string(name) + (codec_keys.empty() ? "" : ":" + codec_keys));
  if (!config.is_ok()) return config.status();
  switch (config->codec) {
    case CodecId::kFloat32: plan.kind = Kind::kDense; break;
    case CodecId::kTopK: plan.kind = Kind::kSparse; break;
    default: plan.kind = Kind::kQuantized; break;
  }
  const bool cast = config->codec == CodecId::kFloat16 || config->codec == CodecId::kBFloat16;
  plan.error_feedback = plan.kind != Kind::kDense && ef.value_or(!cast);
  // Momentum correction works through the residual: without error feedback the optimizer
  // keeps its momentum instead.
  if (!plan.error_feedback) config->momentum = 0.0f;
  Result<std::unique_ptr<Codec>> codec = make_codec(*config);
  if (!codec.is_ok()) return codec.status();
  plan.codec_config = *config;
  plan.codec = std::shared_ptr<const Codec>(std::move(codec.value()));
  if (plan.kind == Kind::kDense && ef.value_or(false))
    return bad_spec(spec, "float32 has no error feedback");
  if (dense_at && plan.kind != Kind::kSparse)
    return bad_spec(spec, "dense_at applies to topk only");
  plan.dense_threshold = dense_at.value_or(1.0);
  std::string canonical = to_spec(*config);
  if (plan.kind != Kind::kDense) {
    canonical += canonical.find(':') == std::string::npos ? ":" : ",";
    canonical += std::string("ef=") + (plan.error_feedback ? "1" : "0");
  }
  if (plan.kind == Kind::kSparse) {
    std::string d = std::to_string(plan.dense_threshold);
    canonical += ",dense_at=" + d;
  }
  plan.spec = std::move(canonical);
  return plan;
}

// ---- CompressionState -----------------------------------------------------------------------

std::span<float> CompressionState::owner_residual(std::uint64_t tensor, std::size_t tensor_count,
                                                  int group_size, int slice, std::size_t offset,
                                                  std::size_t count) {
  auto it = owner_.find(tensor);
  if (it != owner_.end()) {
    const Owner& o = it->second;
    if (o.group_size != group_size || o.slice != slice || o.offset != offset ||
        o.residual.size() != count || o.tensor_count != tensor_count) {
      release_owner(tensor);
      it = owner_.end();
    }
  }
  if (it == owner_.end()) {
    Owner o;
    o.group_size = group_size;
    o.slice = slice;
    o.offset = offset;
    o.tensor_count = tensor_count;
    o.residual.assign(count, 0.0f);
    it = owner_.emplace(tensor, std::move(o)).first;
  }
  return it->second.residual;
}

double CompressionState::owner_residual_norm2(std::uint64_t tensor) const {
  const auto it = owner_.find(tensor);
  if (it == owner_.end()) return 0;
  double s = 0;
  for (float x : it->second.residual) s += static_cast<double>(x) * x;
  return s;
}

void CompressionState::release_owner(std::uint64_t tensor) {
  const auto it = owner_.find(tensor);
  if (it == owner_.end()) return;
  const Owner& o = it->second;
  // Folding needs the worker residual of the same tensor size; a tensor that changed size
  // has lost its residuals anyway (error_feedback.h), so there is nothing to fold into.
  if (policy_ == OwnerResidualPolicy::kFold && o.offset + o.residual.size() <= o.tensor_count) {
    const std::uint64_t key = ErrorFeedback::key(tensor, kStageWorker);
    std::span<float> w = worker_.residual(key, o.tensor_count);
    for (std::size_t i = 0; i < o.residual.size(); ++i) w[o.offset + i] += o.residual[i];
  }
  owner_.erase(it);
}

Result<PowerSgd*> CompressionState::powersgd(std::uint64_t tensor, std::size_t total_count,
                                             std::span<const MatrixShape> shapes,
                                             const PowerSgdParams& params) {
  PowerSgdEntry& e = powersgd_[tensor];
  const auto same_shape = [](const MatrixShape& a, const MatrixShape& b) {
    return a.offset == b.offset && a.rows == b.rows && a.cols == b.cols;
  };
  const bool same =
      e.psgd && e.total_count == total_count &&
      std::equal(shapes.begin(), shapes.end(), e.shapes.begin(), e.shapes.end(), same_shape) &&
      e.params.rank == params.rank && e.params.error_feedback == params.error_feedback &&
      e.params.warm_start == params.warm_start && e.params.seed == params.seed;
  if (!same) {
    Result<PowerSgd> made = PowerSgd::create(total_count, {shapes.begin(), shapes.end()}, params);
    if (!made.is_ok()) {
      powersgd_.erase(tensor);
      return made.status();
    }
    e.total_count = total_count;
    e.shapes.assign(shapes.begin(), shapes.end());
    e.params = params;
    e.psgd.emplace(std::move(made).value());
  }
  return &*e.psgd;
}

void CompressionState::on_view_change(int new_size, int new_rank) {
  std::vector<std::uint64_t> stale;
  for (const auto& [tensor, o] : owner_) {
    if (o.group_size != new_size || o.slice != new_rank) stale.push_back(tensor);
  }
  for (std::uint64_t t : stale) release_owner(t);
}

void CompressionState::on_rejoin() {
  worker_.reset_all();
  owner_.clear();
  powersgd_.clear();
}

CompressionState::Snapshot CompressionState::snapshot(std::uint64_t tensor) const {
  Snapshot s;
  s.tensor = tensor;
  s.worker = worker_.snapshot(ErrorFeedback::key(tensor, kStageWorker));
  if (const auto it = owner_.find(tensor); it != owner_.end()) {
    s.owner_present = true;
    s.owner = it->second;
  }
  if (const auto it = powersgd_.find(tensor); it != powersgd_.end() && it->second.psgd) {
    const PowerSgdEntry& e = it->second;
    s.powersgd = Snapshot::PowerSgdState{e.total_count, e.shapes, e.params, e.psgd->snapshot()};
  }
  return s;
}

void CompressionState::restore(const Snapshot& s) {
  worker_.restore(s.worker);
  if (s.owner_present) {
    owner_[s.tensor] = s.owner;
  } else {
    owner_.erase(s.tensor);
  }
  if (!s.powersgd) {
    powersgd_.erase(s.tensor);
    return;
  }
  // If the object was replaced since (another layout or seed), rebuild the one the
  // snapshot was taken of, then put its state back.
  const Snapshot::PowerSgdState& p = *s.powersgd;
  Result<PowerSgd*> ps = powersgd(s.tensor, p.total_count, p.shapes, p.params);
  TRIB_CHECK(ps.is_ok()) << "a PowerSGD layout that was valid no longer is: "
                         << ps.status().to_string();
  (*ps)->restore(p.state);
}

void CompressionState::begin_attempt(std::uint64_t tensor, std::size_t count, bool powersgd) {
  Attempt& a = attempt_;
  a.tensor = tensor;
  a.count = count;
  a.worker_present = worker_.contains(ErrorFeedback::key(tensor, kStageWorker));
  const auto it = owner_.find(tensor);
  a.owner_present = it != owner_.end();
  a.worker_saved.clear();
  a.owner_saved.clear();
  a.momentum_saved.clear();
  a.powersgd.reset();
  if (!powersgd) return;
  if (const auto p = powersgd_.find(tensor); p != powersgd_.end() && p->second.psgd) {
    const PowerSgdEntry& e = p->second;
    a.powersgd = Snapshot::PowerSgdState{e.total_count, e.shapes, e.params, e.psgd->snapshot()};
  }
}

void CompressionState::save_worker(std::size_t offset, std::size_t n, bool momentum) {
  Attempt& a = attempt_;
  if (!a.worker_present || n == 0) return;  // absent before: rollback erases it
  const std::uint64_t key = ErrorFeedback::key(a.tensor, kStageWorker);
  const std::span<float> r = worker_.residual(key, a.count);
  if (a.residual.size() < a.count) a.residual.resize(a.count);
  std::copy_n(r.begin() + static_cast<std::ptrdiff_t>(offset), n,
              a.residual.begin() + static_cast<std::ptrdiff_t>(offset));
  a.worker_saved.emplace_back(offset, n);
  if (momentum) {
    const std::span<float> m = worker_.momentum(key, a.count);
    if (a.momentum.size() < a.count) a.momentum.resize(a.count);
    std::copy_n(m.begin() + static_cast<std::ptrdiff_t>(offset), n,
                a.momentum.begin() + static_cast<std::ptrdiff_t>(offset));
    a.momentum_saved.emplace_back(offset, n);
  }
}

void CompressionState::save_owner(std::size_t offset, std::size_t n) {
  Attempt& a = attempt_;
  const auto it = owner_.find(a.tensor);
  if (!a.owner_present || it == owner_.end() || n == 0) return;
  const std::vector<float>& r = it->second.residual;
  if (a.owner.size() < r.size()) a.owner.resize(r.size());
  std::copy_n(r.begin() + static_cast<std::ptrdiff_t>(offset), n,
              a.owner.begin() + static_cast<std::ptrdiff_t>(offset));
  a.owner_saved.emplace_back(offset, n);
}

void CompressionState::rollback() {
  const Attempt& a = attempt_;
  const std::uint64_t key = ErrorFeedback::key(a.tensor, kStageWorker);
  if (!a.worker_present) {
    worker_.reset(key);
  } else if (worker_.contains(key)) {
    if (!a.worker_saved.empty()) {
      const std::span<float> r = worker_.residual(key, a.count);
      for (const auto& [off, n] : a.worker_saved)
        std::copy_n(a.residual.begin() + static_cast<std::ptrdiff_t>(off), n,
                    r.begin() + static_cast<std::ptrdiff_t>(off));
    }
    if (!a.momentum_saved.empty()) {
      const std::span<float> m = worker_.momentum(key, a.count);
      for (const auto& [off, n] : a.momentum_saved)
        std::copy_n(a.momentum.begin() + static_cast<std::ptrdiff_t>(off), n,
                    m.begin() + static_cast<std::ptrdiff_t>(off));
    }
  }
  if (!a.owner_present) {
    owner_.erase(a.tensor);
  } else if (const auto it = owner_.find(a.tensor); it != owner_.end()) {
    for (const auto& [off, n] : a.owner_saved) {
      std::copy_n(a.owner.begin() + static_cast<std::ptrdiff_t>(off), n,
                  it->second.residual.begin() + static_cast<std::ptrdiff_t>(off));
    }
  }
  if (!a.powersgd) {
    powersgd_.erase(a.tensor);
    return;
  }
  const Snapshot::PowerSgdState& p = *a.powersgd;
  Result<PowerSgd*> ps = powersgd(a.tensor, p.total_count, p.shapes, p.params);
  TRIB_CHECK(ps.is_ok()) << "a PowerSGD layout that was valid no longer is: "
                         << ps.status().to_string();
  (*ps)->restore(p.state);
}

// ---- entry point ----------------------------------------------------------------------------

Status compressed_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                             const CompressionContext& ctx,
                             const algorithms::CollectiveOptions& options) {
  if (ctx.plan == nullptr)
    return error(StatusCode::kInvalidArgument, "compressed_all_reduce: no plan");
  if (op != ReduceOp::kSum && op != ReduceOp::kAvg) {
    return error(StatusCode::kInvalidArgument, "compressed_all_reduce: op must be sum or avg");
  }
  if (count > 0 && data == nullptr) {
    return error(StatusCode::kInvalidArgument, "compressed_all_reduce: null data");
  }
  if (ctx.tensor_id >= (std::uint64_t{1} << 56)) {
    return error(StatusCode::kInvalidArgument, "compressed_all_reduce: tensor id >= 2^56");
  }
  if (options.chunk_bytes == 0) {
    return error(StatusCode::kInvalidArgument, "compressed_all_reduce: chunk_bytes is 0");
  }
  const CompressionPlan& plan = *ctx.plan;
  const bool stateful = plan.kind == CompressionPlan::Kind::kPowerSgd ||
                        (plan.kind != CompressionPlan::Kind::kDense &&
                         (plan.error_feedback || (plan.codec && plan.codec->wants_momentum())));
  if (stateful && ctx.state == nullptr) {
    return error(StatusCode::kInvalidArgument,
                 "compressed_all_reduce: plan " + plan.spec + " needs a CompressionState");
  }
  if (ctx.stats) {
    *ctx.stats = CompressionStats{};
    ctx.stats->raw_bytes = count * sizeof(float);
  }
  const std::uint32_t check = descriptor_check(plan, count, op, ctx.step, link.size());

  if (ctx.state) ctx.state->scratch().bytes_used = 0;
  if (plan.kind == CompressionPlan::Kind::kQuantized && plan.error_feedback) {
    // Settle slice ownership first (fold or drop a stage-2 residual left from another
    // view): a view-change action, independent of this attempt, so never rolled back.
    const algorithms::Range mine = algorithms::balanced_part(count, link.size(), link.rank());
    (void)ctx.state->owner_residual(ctx.tensor_id, count, link.size(), link.rank(), mine.begin,
                                    mine.count);
  }
  if (stateful) {
    ctx.state->begin_attempt(ctx.tensor_id, count, plan.kind == CompressionPlan::Kind::kPowerSgd);
  }
  Status s;
  switch (plan.kind) {
    case CompressionPlan::Kind::kDense:
      s = dense_all_reduce(link, data, count, op, ctx, options);
      break;
    case CompressionPlan::Kind::kQuantized:
      s = quantized_all_reduce(link, data, count, op, ctx, options, check);
      break;
    case CompressionPlan::Kind::kSparse:
      s = sparse_all_reduce(link, data, count, op, ctx, options, check);
      break;
    case CompressionPlan::Kind::kPowerSgd:
      s = powersgd_all_reduce(link, data, count, op, ctx, options);
      break;
  }
  if (!s.is_ok() && stateful) ctx.state->rollback();
  return s;
}

}  // namespace tributary::compression
