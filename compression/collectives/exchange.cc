// The compressed collectives' wire exchange (exchange.h).
#include "compression/collectives/exchange.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/hash.h"

namespace tributary::compression::collectives {

algorithms::Tag make_tag(std::uint64_t seq, std::uint32_t check, std::uint32_t stage,
                         std::size_t piece, bool payload) {
  const auto slot = static_cast<std::uint32_t>((stage << 29) | (piece << 1) | (payload ? 1u : 0u));
  return {seq, slot, check};
}

std::uint32_t descriptor_check(const CompressionPlan& plan, std::size_t count, ReduceOp op,
                               std::uint64_t step, int n) {
  // The four words little-endian, as the hand-written loop this replaced hashed them on
  // x86: the value is pinned by a test.
  return Fnv1a32()
      .add("compressed_all_reduce")
      .add(plan.spec)
      .add_le(count, 8)
      .add_le(static_cast<std::uint64_t>(op), 8)
      .add_le(step, 8)
      .add_le(static_cast<std::uint64_t>(n), 8)
      .value();
}

std::size_t num_pieces(algorithms::Range range, std::size_t per_piece) {
  return std::max<std::size_t>(1, algorithms::num_chunks(range.count, per_piece));
}

algorithms::Range piece_of(algorithms::Range range, std::size_t per_piece, std::size_t p) {
  if (range.count == 0) return range;
  return algorithms::chunk_of(range, per_piece, p);
}

Exchange::Exchange(algorithms::Link& link, std::uint64_t seq, std::uint32_t check,
                   Deadline deadline, CompressionStats* stats)
    : link_(link),
      seq_(seq),
      check_(check),
      deadline_(deadline),
      // Every send of the call stays in flight (its buffer is the call's scratch anyway):
      // per-peer sockets then drain independently, so a slow peer does not hold back
      // sends to the others. A window of 64 cost 15% at 4 ranks on a shaped link
      // (bench/results/shaped_2026-11-21.md).
      sends_(link, deadline, std::size_t{1} << 16),
      stats_(stats) {}

Status Exchange::send(int peer, std::uint32_t stage, std::size_t piece,
                      std::span<const std::byte> payload) {
  out_words_.push_back(std::make_unique<std::uint64_t>(payload.size()));
  const std::span<const std::byte> word(reinterpret_cast<const std::byte*>(out_words_.back().get()),
                                        sizeof(std::uint64_t));
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

void Exchange::post(Incoming& in) {
  in.size_handle = link_.recv(
      in.peer, make_tag(seq_, check_, in.stage, in.piece, false),
      std::span<std::byte>(reinterpret_cast<std::byte*>(&in.size_word), sizeof(std::uint64_t)));
}

void Exchange::post_pieces(CompressionState::Scratch& scratch, int peer, std::uint32_t stage,
                           std::size_t pieces, std::vector<Incoming>& in) {
  in.resize(pieces);
  for (std::size_t p = 0; p < pieces; ++p) {
    in[p].peer = peer, in[p].stage = stage, in[p].piece = p, in[p].bytes = &scratch.next_bytes();
    post(in[p]);
  }
}

Status Exchange::start_payload(Incoming& in, std::size_t max_bytes) {
  TRIB_RETURN_IF_ERROR(algorithms::wait_or_abort(link_, in.size_handle, deadline_));
  if (in.size_word < kHeaderBytes || in.size_word > max_bytes) {
    return fail(error(StatusCode::kBadFrame,
                      "compressed_all_reduce: rank " + std::to_string(in.peer) +
                          " announced a payload of " + std::to_string(in.size_word) +
                          " bytes, outside [16, " + std::to_string(max_bytes) + "]"));
  }
  in.bytes->resize(static_cast<std::size_t>(in.size_word));
  in.payload_handle = link_.recv(in.peer, make_tag(seq_, check_, in.stage, in.piece, true),
                                 std::span<std::byte>(*in.bytes));
  return Status::ok();
}

Status Exchange::finish_payload(Incoming& in) {
  return algorithms::wait_or_abort(link_, in.payload_handle, deadline_);
}

Status Exchange::drain() { return sends_.drain(); }

Status Exchange::sum_piece(const Codec& codec, Incomings& in, std::size_t p,
                           std::span<const std::byte> own, float* dst, std::size_t count) {
  const int n = link_.size();
  const int r = link_.rank();
  for (int i = 0; i < n; ++i) {
    if (i != r) {
      TRIB_RETURN_IF_ERROR(
          start_payload(in[static_cast<std::size_t>(i)][p], codec.max_encoded_bytes(count)));
    }
  }
  for (int i = 0; i < n; ++i) {
    Incoming* from = i == r ? nullptr : &in[static_cast<std::size_t>(i)][p];
    if (from) TRIB_RETURN_IF_ERROR(finish_payload(*from));
    const std::span<const std::byte> payload =
        from ? std::span<const std::byte>(*from->bytes) : own;
    Status s =
        i == 0 ? codec.decode(payload, dst, count) : codec.decode_accumulate(payload, dst, count);
    if (!s.is_ok()) return fail(std::move(s));
  }
  return Status::ok();
}

Status Exchange::fail(Status s) {
  link_.abort(s);
  return s;
}

}  // namespace tributary::compression::collectives
