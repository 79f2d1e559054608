// Recursive halving-doubling (Rabenseifner): a recursive-halving reduce-scatter over the
// largest power of two p <= n ranks, then a recursive-doubling all-gather; log2(p) steps
// each way, each moving half of what the previous one did.
//
// With n not a power of two, the first 2(n-p) ranks pair up first: each even one hands
// its whole vector to its odd neighbour and sits out, and receives the final result at
// the end. Every element is reduced in one fixed pairing order (lower virtual rank on
// the left), at the one rank that owns its segment after the halving, and only copied
// afterwards, so all ranks get the owner's bits.
#include <deque>
#include <vector>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/in_flight.h"
#include "algorithms/partition.h"
#include "algorithms/scratch.h"
#include "core/reduce.h"

namespace tributary::algorithms {
namespace {

class HalvingDoubling {
 public:
  explicit HalvingDoubling(const ReduceJob& job)
      : job_(job),
        link_(job.link),
        es_(job.element_size()),
        pc_(job.chunk_elements),
        stride_(std::max<std::size_t>(1, num_chunks(job.count, pc_))),
        sends_(job.link, job.deadline),
        slot_bytes_(std::min(pc_, job.count) * es_),
        staging_(kRecvDepth * slot_bytes_) {}

  Status run();

 private:
  Tag tag(int phase, std::size_t chunk) const {
    return job_.tags.at(static_cast<std::uint64_t>(phase) * stride_ + chunk);
  }
  Status send_range(int peer, int phase, Range range, const std::byte* base);
  Status recv_range(int peer, int phase, Range range, std::byte* base);
  // out[range] = (incoming op mine) or (mine op incoming), chunk by chunk.
  Status reduce_range(int peer, int phase, Range range, const std::byte* mine, bool incoming_first);

  const ReduceJob& job_;
  Link& link_;
  std::size_t es_;
  std::size_t pc_;
  std::uint64_t stride_;
  SendWindow sends_;
  std::size_t slot_bytes_;
  Scratch staging_;
};

Status HalvingDoubling::send_range(int peer, int phase, Range range, const std::byte* base) {
  for (std::size_t c = 0; c < num_chunks(range.count, pc_); ++c) {
    const Range r = chunk_of(range, pc_, c);
    TRIB_RETURN_IF_ERROR(sends_.add(link_.send(
        peer, tag(phase, c), std::span<const std::byte>(base + r.begin * es_, r.count * es_))));
  }
  return Status::ok();
}

Status HalvingDoubling::recv_range(int peer, int phase, Range range, std::byte* base) {
  const std::size_t chunks = num_chunks(range.count, pc_);
  std::deque<Link::Handle> posted;
  std::size_t next = 0;
  auto post = [&] {
    if (next == chunks) return;
    const Range r = chunk_of(range, pc_, next);
    posted.push_back(link_.recv(peer, tag(phase, next),
                                std::span<std::byte>(base + r.begin * es_, r.count * es_)));
    ++next;
  };
  for (std::size_t i = 0; i < kRecvDepth; ++i) post();
  while (!posted.empty()) {
    const Link::Handle h = posted.front();
    posted.pop_front();
    post();
    TRIB_RETURN_IF_ERROR(wait_or_abort(link_, h, job_.deadline));
  }
  return Status::ok();
}

Status HalvingDoubling::reduce_range(int peer, int phase, Range range, const std::byte* mine,
                                     bool incoming_first) {
  const std::size_t chunks = num_chunks(range.count, pc_);
  std::deque<Link::Handle> posted;
  if (link_.combines()) {
    // The link reduces each chunk into its place as it arrives: nothing is staged, so
    // every chunk can be posted at once (the operand, this round's input, is final).
    for (std::size_t c = 0; c < chunks; ++c) {
      const Range r = chunk_of(range, pc_, c);
      posted.push_back(link_.recv_combine(
          peer, tag(phase, c), std::span<std::byte>(job_.recv + r.begin * es_, r.count * es_),
          Combine{mine + r.begin * es_, job_.dtype, job_.op, incoming_first}));
    }
    for (const Link::Handle h : posted) TRIB_RETURN_IF_ERROR(wait_or_abort(link_, h, job_.deadline));
    return Status::ok();
  }
  std::size_t next = 0;
  auto slot = [&](std::size_t c) { return staging_.data() + (c % kRecvDepth) * slot_bytes_; };
  auto post = [&] {
    if (next == chunks) return;
    const Range r = chunk_of(range, pc_, next);
    posted.push_back(
        link_.recv(peer, tag(phase, next), std::span<std::byte>(slot(next), r.count * es_)));
    ++next;
  };
  for (std::size_t i = 0; i + 1 < kRecvDepth; ++i) post();
  for (std::size_t c = 0; c < chunks; ++c) {
    const Link::Handle h = posted.front();
    posted.pop_front();
    post();  // into the slot chunk c-1 has finished with
    TRIB_RETURN_IF_ERROR(wait_or_abort(link_, h, job_.deadline));
    const Range r = chunk_of(range, pc_, c);
    const std::byte* own = mine + r.begin * es_;
    std::byte* out = job_.recv + r.begin * es_;
    if (incoming_first) {
      reduce_to(out, slot(c), own, r.count, job_.dtype, job_.op);
    } else {
      reduce_to(out, own, slot(c), r.count, job_.dtype, job_.op);
    }
  }
  return Status::ok();
}

Status HalvingDoubling::run() {
  const int n = link_.size();
  const int rank = link_.rank();
  const int log_p = floor_log2(n);
  const int p = 1 << log_p;
  const int extra = n - p;
  const Range all{0, job_.count};
  const int fold_phase = 0;
  const int unfold_phase = 2 * log_p + 1;

  const std::byte* mine = job_.send;
  int vrank = rank - extra;
  if (rank < 2 * extra) {
    if (rank % 2 == 0) {
      TRIB_RETURN_IF_ERROR(send_range(rank + 1, fold_phase, all, mine));
      // In place, the result lands where the hand-over is still being read from.
      TRIB_RETURN_IF_ERROR(sends_.drain());
      TRIB_RETURN_IF_ERROR(recv_range(rank + 1, unfold_phase, all, job_.recv));
      return Status::ok();
    }
    TRIB_RETURN_IF_ERROR(reduce_range(rank - 1, fold_phase, all, mine, true));
    mine = job_.recv;
    vrank = rank / 2;
  }
  auto real_rank = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };

  struct Split {
    Range keep;
    Range give;
  };
  std::vector<Split> splits;
  Range current = all;
  for (int i = 0; i < log_p; ++i) {
    const int mask = p >> (i + 1);
    const int partner = real_rank(vrank ^ mask);
    const bool lower = (vrank & mask) == 0;
    const Range low{current.begin, current.count / 2};
    const Range high{low.end(), current.count - low.count};
    const Split s{lower ? low : high, lower ? high : low};
    TRIB_RETURN_IF_ERROR(send_range(partner, 1 + i, s.give, mine));
    TRIB_RETURN_IF_ERROR(reduce_range(partner, 1 + i, s.keep, mine, !lower));
    mine = job_.recv;
    splits.push_back(s);
    current = s.keep;
  }
  // The doubling receives into the halves the halving is still sending from.
  TRIB_RETURN_IF_ERROR(sends_.drain());
  if (job_.op == ReduceOp::kAvg) {
    scale_by_count(job_.recv + current.begin * es_, current.count, job_.dtype, n);
  }
  for (int i = log_p - 1; i >= 0; --i) {
    const int phase = 1 + log_p + (log_p - 1 - i);
    const int partner = real_rank(vrank ^ (p >> (i + 1)));
    const Split& s = splits[static_cast<std::size_t>(i)];
    TRIB_RETURN_IF_ERROR(send_range(partner, phase, s.keep, job_.recv));
    TRIB_RETURN_IF_ERROR(recv_range(partner, phase, s.give, job_.recv));
  }
  if (rank < 2 * extra) TRIB_RETURN_IF_ERROR(send_range(rank - 1, unfold_phase, all, job_.recv));
  return sends_.drain();
}

}  // namespace

Status halving_doubling_all_reduce(const ReduceJob& job) { return HalvingDoubling(job).run(); }

}  // namespace tributary::algorithms
