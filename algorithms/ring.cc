// Ring reduce-scatter / all-gather, and the public functions built on them.
#include "algorithms/ring.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "algorithms/collectives.h"
#include "algorithms/scratch.h"
#include "algorithms/validate.h"
#include "core/check.h"
#include "core/reduce.h"

namespace tributary::algorithms {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

std::size_t largest_block(const std::vector<Range>& blocks) {
  std::size_t m = 0;
  for (const Range& b : blocks) m = std::max(m, b.count);
  return m;
}

struct Unit {
  int step = 0;
  std::size_t chunk = 0;
  Range range;
};

// Walks the non-empty (step, chunk) receive units of one ring phase in the order both
// ends of every ring edge process them: at step s this rank receives block
// (rank - s - offset) mod n.
class UnitCursor {
 public:
  UnitCursor(const std::vector<Range>& blocks, int rank, int offset, std::size_t per_chunk)
      : blocks_(blocks),
        rank_(rank),
        offset_(offset),
        per_chunk_(per_chunk),
        steps_(static_cast<int>(blocks.size()) - 1) {
    skip_empty();
  }
  bool done() const { return step_ >= steps_; }
  Unit get() const { return {step_, chunk_, chunk_of(block(step_), per_chunk_, chunk_)}; }
  void next() {
    ++chunk_;
    skip_empty();
  }

 private:
  const Range& block(int step) const {
    return blocks_[static_cast<std::size_t>(
        mod(rank_ - step - offset_, static_cast<int>(blocks_.size())))];
  }
  void skip_empty() {
    while (step_ < steps_ && chunk_ >= num_chunks(block(step_).count, per_chunk_)) {
      ++step_;
      chunk_ = 0;
    }
  }

  const std::vector<Range>& blocks_;
  int rank_;
  int offset_;
  std::size_t per_chunk_;
  int steps_;
  int step_ = 0;
  std::size_t chunk_ = 0;
};

struct PostedRecv {
  Unit unit;
  Link::Handle handle = 0;
  std::byte* data = nullptr;
  bool staged = false;    // landed in a staging slot rather than in its final place
  bool combined = false;  // the link reduced it into its final place (Link::combines)
};

// Scratch for reduced partials when the caller has no room for them (reduce_scatter's
// recv holds only the own block). A slot is reused only after its send completed.
inline constexpr std::size_t kPoolSlots = 4;
// Staging slots for receives that cannot land in their final place (in-place calls,
// where that place still holds this rank's operand).
inline constexpr std::size_t kStageSlots = 4;

}  // namespace

std::uint64_t ring_phase_slots(const std::vector<Range>& blocks, std::size_t per_chunk) {
  const std::uint64_t stride =
      std::max<std::size_t>(1, num_chunks(largest_block(blocks), per_chunk));
  return stride * (blocks.size() - 1);
}

// Receives are posted as far ahead as their landing place allows, so payloads are read
// straight from the socket into place instead of arriving unexpected and being copied:
// a receive that lands in its final place (out of place: partials and owned_out) is
// posted at once for the whole phase; one that needs staging waits for a free slot.
// Landing early is safe: a region is written by its receive before this rank reduces
// and forwards it, and is received into only once per phase.
Status ring_reduce_scatter(const ReduceJob& job, const std::vector<Range>& blocks,
                           const std::byte* mine, std::byte* partials, std::byte* owned_out,
                           std::uint64_t slot_base, SendWindow& sends,
                           const OwnedChunkFn& on_owned) {
  Link& link = job.link;
  const int n = link.size();
  const int rank = link.rank();
  TRIB_CHECK(static_cast<int>(blocks.size()) == n && n >= 2) << "blocks=" << blocks.size();
  const int left = mod(rank - 1, n);
  const int right = mod(rank + 1, n);
  const int last = n - 2;
  const std::size_t es = job.element_size();
  const std::size_t pc = job.chunk_elements;
  const std::uint64_t stride = std::max<std::size_t>(1, num_chunks(largest_block(blocks), pc));
  auto tag = [&](int step, std::size_t chunk) {
    return job.tags.at(slot_base + static_cast<std::uint64_t>(step) * stride + chunk);
  };
  auto bytes = [es](const std::byte* base, Range r) {
    return std::span<const std::byte>(base + r.begin * es, r.count * es);
  };
  const Range owned = blocks[static_cast<std::size_t>(rank)];
  // Where unit u's reduced result goes, when the caller provides room for it.
  auto final_place = [&](const Unit& u) -> std::byte* {
    if (u.step == last) return owned_out + (u.range.begin - owned.begin) * es;
    return partials != nullptr ? partials + u.range.begin * es : nullptr;
  };

  const std::size_t slot_bytes = std::min(pc, largest_block(blocks)) * es;
  Scratch staging;
  std::size_t staged_posted = 0;
  std::size_t staged_live = 0;
  Scratch pool;
  std::array<std::optional<Link::Handle>, kPoolSlots> pool_sends;
  std::size_t pool_next = 0;

  UnitCursor cursor(blocks, rank, 2, pc);
  std::deque<PostedRecv> posted;
  const bool combines = link.combines();
  auto post_ahead = [&] {
    while (!cursor.done()) {
      const Unit u = cursor.get();
      std::byte* dst = final_place(u);
      if (combines && dst != nullptr) {
        // Reduced with this rank's operand as it lands, in place too: the operand is the
        // caller's input, final from the start.
        posted.push_back({u,
                          link.recv_combine(left, tag(u.step, u.chunk),
                                            std::span<std::byte>(dst, u.range.count * es),
                                            Combine{mine + u.range.begin * es, job.dtype, job.op,
                                                    true}),
                          dst, false, true});
        cursor.next();
        continue;
      }
      const bool staged = dst == nullptr || dst == mine + u.range.begin * es;
      if (staged) {
        if (staged_live == kStageSlots) return;
        if (!staging) staging = Scratch(kStageSlots * slot_bytes);
        dst = staging.data() + (staged_posted++ % kStageSlots) * slot_bytes;
        ++staged_live;
      }
      posted.push_back(
          {u, link.recv(left, tag(u.step, u.chunk), std::span<std::byte>(dst, u.range.count * es)),
           dst, staged});
      cursor.next();
    }
  };
  post_ahead();

  // Step 0 forwards this rank's own contribution to block rank-1: nothing to wait for.
  const Range first = blocks[static_cast<std::size_t>(mod(rank - 1, n))];
  for (std::size_t c = 0; c < num_chunks(first.count, pc); ++c) {
    TRIB_RETURN_IF_ERROR(
        sends.add(link.send(right, tag(0, c), bytes(mine, chunk_of(first, pc, c)))));
  }

  while (!posted.empty()) {
    const PostedRecv p = posted.front();
    posted.pop_front();
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, p.handle, job.deadline));
    const Unit& u = p.unit;
    std::byte* out = final_place(u);
    std::size_t pool_slot = 0;
    if (out == nullptr) {
      pool_slot = pool_next++ % kPoolSlots;
      if (auto& pending = pool_sends[pool_slot]) {
        TRIB_RETURN_IF_ERROR(wait_or_abort(link, *pending, job.deadline));
        pending.reset();
      }
      if (!pool) pool = Scratch(kPoolSlots * slot_bytes);
      out = pool.data() + pool_slot * slot_bytes;
    }
    // incoming (op) mine: out may be exactly where the incoming partial landed.
    if (!p.combined) {
      reduce_to(out, p.data, mine + u.range.begin * es, u.range.count, job.dtype, job.op);
    }
    if (p.staged) {
      --staged_live;
      post_ahead();  // into the slot just reduced from
    }
    if (u.step == last) {
      if (on_owned) TRIB_RETURN_IF_ERROR(on_owned(u.chunk, u.range));
      continue;
    }
    const Link::Handle h = link.send(right, tag(u.step + 1, u.chunk),
                                     std::span<const std::byte>(out, u.range.count * es));
    if (partials != nullptr) {
      TRIB_RETURN_IF_ERROR(sends.add(h));
    } else {
      pool_sends[pool_slot] = h;
    }
  }
  for (auto& pending : pool_sends) {
    if (pending) TRIB_RETURN_IF_ERROR(wait_or_abort(link, *pending, job.deadline));
  }
  return Status::ok();
}

RingAllGather::RingAllGather(const ReduceJob& job, const std::vector<Range>& blocks, std::byte* out,
                             std::uint64_t slot_base)
    : job_(job),
      blocks_(blocks),
      out_(out),
      slot_base_(slot_base),
      stride_(std::max<std::size_t>(1, num_chunks(largest_block(blocks), job.chunk_elements))) {
  Link& link = job.link;
  const int n = link.size();
  TRIB_CHECK(static_cast<int>(blocks.size()) == n && n >= 2) << "blocks=" << blocks.size();
  const int left = mod(link.rank() - 1, n);
  const std::size_t es = job.element_size();
  // Every receive lands in its final place, so all of them are posted up front.
  for (UnitCursor cursor(blocks, link.rank(), 1, job.chunk_elements); !cursor.done();
       cursor.next()) {
    const Unit u = cursor.get();
    std::byte* dst = out + u.range.begin * es;
    posted_.push_back(
        {u.step, u.chunk, u.range,
         link.recv(left, tag(u.step, u.chunk), std::span<std::byte>(dst, u.range.count * es))});
  }
}

Tag RingAllGather::tag(int step, std::size_t chunk) const {
  return job_.tags.at(slot_base_ + static_cast<std::uint64_t>(step) * stride_ + chunk);
}

Status RingAllGather::send_own(std::size_t chunk, const std::byte* own, SendWindow& sends) {
  Link& link = job_.link;
  const int right = mod(link.rank() + 1, link.size());
  const std::size_t es = job_.element_size();
  const Range mine = blocks_[static_cast<std::size_t>(link.rank())];
  TRIB_CHECK(chunk == own_sent_) << "own chunk " << chunk << " sent out of order";
  ++own_sent_;
  const Range r = chunk_of(mine, job_.chunk_elements, chunk);
  return sends.add(
      link.send(right, tag(0, chunk),
                std::span<const std::byte>(own + (r.begin - mine.begin) * es, r.count * es)));
}

Status RingAllGather::run(const std::byte* own, SendWindow& sends) {
  Link& link = job_.link;
  const int n = link.size();
  const int right = mod(link.rank() + 1, n);
  const std::size_t es = job_.element_size();
  const Range mine = blocks_[static_cast<std::size_t>(link.rank())];
  while (own_sent_ < num_chunks(mine.count, job_.chunk_elements)) {
    TRIB_RETURN_IF_ERROR(send_own(own_sent_, own, sends));
  }
  for (const Posted& p : posted_) {
    TRIB_RETURN_IF_ERROR(wait_or_abort(link, p.handle, job_.deadline));
    if (p.step == n - 2) continue;
    TRIB_RETURN_IF_ERROR(sends.add(
        link.send(right, tag(p.step + 1, p.chunk),
                  std::span<const std::byte>(out_ + p.range.begin * es, p.range.count * es))));
  }
  posted_.clear();
  return Status::ok();
}

Status ring_handshake(Link& link, const TagMaker& tags, Deadline deadline) {
  const int n = link.size();
  if (n == 1) return Status::ok();
  const Link::Handle s = link.send(mod(link.rank() + 1, n), tags.at(0), {});
  const Link::Handle r = link.recv(mod(link.rank() - 1, n), tags.at(0), {});
  TRIB_RETURN_IF_ERROR(wait_or_abort(link, r, deadline));
  return wait_or_abort(link, s, deadline);
}

Status ring_all_reduce(const ReduceJob& job) {
  const int n = job.link.size();
  const int rank = job.link.rank();
  const std::size_t es = job.element_size();
  std::vector<Range> blocks(static_cast<std::size_t>(n));
  for (int b = 0; b < n; ++b) blocks[static_cast<std::size_t>(b)] = balanced_part(job.count, n, b);
  const Range owned = blocks[static_cast<std::size_t>(rank)];
  std::byte* owned_out = job.recv + owned.begin * es;

  // The all-gather's receives are posted before the reduce-scatter starts, so a
  // neighbour that finishes its reduce-scatter first sends straight into recv. They
  // cannot land early: block b comes back around the ring only after every rank,
  // this one included, has forwarded its partial of b, so this rank has finished
  // writing and sending b's region before anything can be received into it.
  RingAllGather gather(job, blocks, job.recv, ring_phase_slots(blocks, job.chunk_elements));
  // Partials go straight into recv (their final place is overwritten by the all-gather),
  // so neither layout copies the vector: in-place reduces into it, out-of-place reads
  // send and writes recv.
  SendWindow sends(job.link, job.deadline);
  // Each own chunk starts around the ring again as soon as it is final, so the two
  // phases overlap instead of meeting at a barrier.
  auto on_owned = [&](std::size_t chunk, Range r) {
    if (job.op == ReduceOp::kAvg) scale_by_count(job.recv + r.begin * es, r.count, job.dtype, n);
    return gather.send_own(chunk, owned_out, sends);
  };
  TRIB_RETURN_IF_ERROR(
      ring_reduce_scatter(job, blocks, job.send, job.recv, owned_out, 0, sends, on_owned));
  TRIB_RETURN_IF_ERROR(gather.run(owned_out, sends));
  return sends.drain();
}

Status reduce_scatter(Link& link, const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op, const CollectiveOptions& options) {
  const int n = link.size();
  TRIB_RETURN_IF_ERROR(validate_shape(recv_count, dtype, static_cast<std::size_t>(n), options));
  TRIB_RETURN_IF_ERROR(validate_op(op));
  TRIB_RETURN_IF_ERROR(validate_buffer(send, recv_count, "send"));
  TRIB_RETURN_IF_ERROR(validate_buffer(recv, recv_count, "recv"));
  const std::size_t es = dtype_size(dtype);
  const std::size_t block_bytes = recv_count * es;
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const bool in_place = out == in + static_cast<std::size_t>(link.rank()) * block_bytes;
  if (!in_place && overlaps(in, block_bytes * static_cast<std::size_t>(n), out, block_bytes)) {
    return error(StatusCode::kInvalidArgument,
                 "reduce_scatter: recv overlaps send but is not send + rank * recv_count");
  }
  const TagMaker tags(
      options.seq,
      Descriptor{
          .kind = Collective::kReduceScatter, .count = recv_count, .dtype = dtype, .op = op});
  if (recv_count == 0) return ring_handshake(link, tags, options.deadline);
  if (n == 1) {
    if (!in_place) std::memcpy(out, in, block_bytes);
  } else {
    std::vector<Range> blocks(static_cast<std::size_t>(n));
    for (int b = 0; b < n; ++b) blocks[static_cast<std::size_t>(b)] = {b * recv_count, recv_count};
    const ReduceJob job{link,
                        in,
                        out,
                        recv_count * static_cast<std::size_t>(n),
                        dtype,
                        op,
                        chunk_elements(options.chunk_bytes, es),
                        options.deadline,
                        tags};
    SendWindow sends(link, options.deadline);
    TRIB_RETURN_IF_ERROR(ring_reduce_scatter(job, blocks, in, nullptr, out, 0, sends));
    TRIB_RETURN_IF_ERROR(sends.drain());
  }
  if (op == ReduceOp::kAvg) scale_by_count(out, recv_count, dtype, n);
  return Status::ok();
}

Status all_gather(Link& link, const void* send, void* recv, std::size_t send_count, DType dtype,
                  const CollectiveOptions& options) {
  const int n = link.size();
  TRIB_RETURN_IF_ERROR(validate_shape(send_count, dtype, static_cast<std::size_t>(n), options));
  TRIB_RETURN_IF_ERROR(validate_buffer(send, send_count, "send"));
  TRIB_RETURN_IF_ERROR(validate_buffer(recv, send_count, "recv"));
  const std::size_t es = dtype_size(dtype);
  const std::size_t block_bytes = send_count * es;
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  std::byte* own_slot = out + static_cast<std::size_t>(link.rank()) * block_bytes;
  const bool in_place = in == own_slot;
  if (!in_place && overlaps(in, block_bytes, out, block_bytes * static_cast<std::size_t>(n))) {
    return error(StatusCode::kInvalidArgument,
                 "all_gather: send overlaps recv but is not recv + rank * send_count");
  }
  const TagMaker tags(
      options.seq, Descriptor{.kind = Collective::kAllGather, .count = send_count, .dtype = dtype});
  if (send_count == 0) return ring_handshake(link, tags, options.deadline);
  if (n > 1) {
    std::vector<Range> blocks(static_cast<std::size_t>(n));
    for (int b = 0; b < n; ++b) blocks[static_cast<std::size_t>(b)] = {b * send_count, send_count};
    const ReduceJob job{link,
                        in,
                        out,
                        send_count * static_cast<std::size_t>(n),
                        dtype,
                        ReduceOp::kSum,
                        chunk_elements(options.chunk_bytes, es),
                        options.deadline,
                        tags};
    RingAllGather gather(job, blocks, out, 0);
    SendWindow sends(link, options.deadline);
    TRIB_RETURN_IF_ERROR(gather.run(in, sends));
    TRIB_RETURN_IF_ERROR(sends.drain());
  }
  // The ring sends the own block from `send` and never writes recv's own block.
  if (!in_place) std::memcpy(own_slot, in, block_bytes);
  return Status::ok();
}

}  // namespace tributary::algorithms
