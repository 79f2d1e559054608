// The fast stint of FailoverLink's pair protocol (failover_link_impl.h): until a pair's
// first move, the callers' messages on the path as they are, numbered by stamps, with
// what arrived early noted; and the hand-over to the descriptor protocol at that move.
#include <algorithm>

#include "transport/failover_link_impl.h"

namespace tributary::transport {
namespace {

bool overlaps(const std::byte* a, const std::byte* b, std::size_t n) {
  return a < b + n && b < a + n;
}

}  // namespace

void FailoverLink::post_fast(Pair& p, Handle h) {
  CallerOp& op = ops_.at(h);
  algorithms::PollableLink& link = *paths_[static_cast<std::size_t>(p.route.current())];
  Arrival& a = p.arrivals.emplace_back();
  a.fast = true;
  a.target = h;
  a.length = op.size;
  op.attached = true;
  const std::span<std::byte> dst(op.data, op.size);
  if (!op.combine) {
    a.under = link.recv(p.peer, op.tag, dst);
  } else if (link.combines() && !overlaps(op.data, op.combine->operand, op.size)) {
    // Combined in place as it lands; received again after a move, it is recomputed from
    // the operand, so a partly combined destination does no harm.
    a.under = link.recv_combine(p.peer, op.tag, dst, *op.combine);
  } else {
    // In place over its own operand, a partly combined destination could not be redone;
    // and a pair whose path does not combine (not the link's first: path_peers) combines
    // from a buffer, as after a move.
    a.buffer = pool_.take(op.size);
    a.under = link.recv(p.peer, op.tag, std::span<std::byte>(a.buffer.get(), op.size));
  }
}

void FailoverLink::finish_fast(Pair& p, Arrival& a, const Status& st, std::uint64_t stamp) {
  // A mismatch is the caller's (sizes or checks that disagree): the path read the message
  // and dropped it, as a plain link does, so it counts as received.
  if (stamp_index1(stamp) > 0) {
    const std::uint64_t index = stamp_index1(stamp) - 1;
    mark_received(p, index);
    on_stamped_ack(p, stamp_ack(stamp));
    if (!p.notes.empty()) {
      // It had arrived before this receive: no longer waiting in the path.
      std::erase_if(p.notes, [&](const EarlyNote& n) { return n.index == index; });
    }
  }
  p.progress_at = now_;
  if (st.is_ok()) {
    on_arrival(a);
  } else {
    finish(a.target, st);
  }
  pool_.give_back(std::move(a.buffer));
}

FailoverLink::Step FailoverLink::step_fast(Pair& p, std::size_t i) {
  Arrival& a = p.arrivals[i];
  std::uint64_t stamp = 0;
  std::optional<Status> st = collect(p.route.current(), a.under, &stamp);
  if (!st) return Step::kPending;
  if (!st->is_ok() && st->code() != StatusCode::kMismatch) {
    fail_path(p, p.route.current(), *st, false);  // end_fast posts it again
    return Step::kPathFailed;
  }
  if (stamp_index1(stamp) == 0) {
    fail_path(
        p, p.route.current(),
        error(StatusCode::kBadFrame, "a message from " + pair_name(p) + " without its number"),
        false);
    return Step::kPathFailed;
  }
  const bool large = a.length >= acked_send_bytes_[static_cast<std::size_t>(p.route.current())];
  finish_fast(p, a, *st, stamp);
  p.arrivals.erase(p.arrivals.begin() + static_cast<std::ptrdiff_t>(i));
  if (large) maybe_ack(p, true);  // its sender's wait() waits for it
  return Step::kDone;
}

void FailoverLink::end_fast(Pair& p) {
  // Before the resume says what was received: every fast receive the path finished counts
  // (the index from its stamp); the others are withdrawn from the path and wait for the
  // resent messages' descriptors. One withdrawn from a path that may come back leaves a
  // receive there that reads and drops the message should it still arrive.
  const int c = p.route.current();
  for (auto it = p.arrivals.begin(); it != p.arrivals.end();) {
    if (!it->fast) {
      ++it;
      continue;
    }
    std::uint64_t stamp = 0;
    std::optional<Status> st = collect(c, it->under, &stamp);
    if (st && (st->is_ok() || st->code() == StatusCode::kMismatch) && stamp_index1(stamp) > 0) {
      finish_fast(p, *it, *st, stamp);
    } else {
      if (it->under != kNoHandle) {
        cancel(c, it->under);
        if (connected(p.route.state(c))) {
          p.discards.push_back({c, paths_[static_cast<std::size_t>(c)]->recv(
                                       p.peer, ops_.at(it->target).tag, std::span<std::byte>())});
        }
      }
      ops_.at(it->target).attached = false;
      p.posted.push_back(it->target);
      pool_.give_back(std::move(it->buffer));
    }
    it = p.arrivals.erase(it);
  }
  // What arrived whole since the last look counts too (the path keeps it after a failure,
  // and the resume will say it was received): no acknowledgement of its own, the resume is one.
  collect_early(p, /*acknowledge=*/false);
  // What arrived early was acknowledged, so it will not be resent: read it back from the
  // path (it is whole there: the receive completes at once) into arrivals that the
  // descriptor protocol matches with the receives, in index order before any resend.
  for (const EarlyNote& n : p.notes) {
    Arrival a;
    a.index = n.index;
    a.tag = n.tag;
    a.length = n.length;
    a.complete = true;
    a.buffer = pool_.take(static_cast<std::size_t>(n.length));
    Handle h = paths_[static_cast<std::size_t>(c)]->recv(
        p.peer, n.tag, std::span<std::byte>(a.buffer.get(), static_cast<std::size_t>(n.length)));
    std::optional<Status> st = collect(c, h);
    if (!st || !st->is_ok()) {
      if (!st) cancel(c, h);
      p.read_back = error(StatusCode::kPeerLost,
                          "message " + std::to_string(n.index) + " from " + pair_name(p) +
                              ", acknowledged, could not be read back from path " +
                              params_.path_names[static_cast<std::size_t>(c)] +
                              (st ? ": " + st->to_string() : ""));
      pool_.give_back(std::move(a.buffer));
      continue;
    }
    p.arrivals.push_back(std::move(a));
  }
  p.notes.clear();
  p.fast = false;
  // The receives posted again take what was read back, in the order they were posted.
  std::sort(p.posted.begin(), p.posted.end(),
            [&](Handle x, Handle y) { return ops_.at(x).order < ops_.at(y).order; });
  const std::vector<Handle> waiting = p.posted;
  for (Handle h : waiting) match_posted(p, h);
}

void FailoverLink::collect_early(Pair& p, bool acknowledge) {
  early_.clear();
  paths_[static_cast<std::size_t>(p.route.current())]->report_early(p.peer, early_);
  bool large = false;
  for (const algorithms::EarlyArrival& e : early_) {
    if (stamp_index1(e.stamp) == 0) continue;  // not the failover link's
    const std::uint64_t index = stamp_index1(e.stamp) - 1;
    if (index < p.low || p.above.count(index) > 0) continue;
    mark_received(p, index);
    on_stamped_ack(p, stamp_ack(e.stamp));
    p.notes.push_back({index, e.tag, e.length});
    p.progress_at = now_;
    large = large || e.length >= acked_send_bytes_[static_cast<std::size_t>(p.route.current())];
  }
  if (large && acknowledge) maybe_ack(p, true);  // its sender's wait() waits for it
}

void FailoverLink::on_stamped_ack(Pair& p, std::uint64_t low24) {
  // The full value is the one nearest above what was acknowledged already; a stamp older
  // than the last acknowledgement (messages complete out of order) lands beyond what was
  // ever sent and is ignored.
  std::uint64_t low = (p.acked & ~kStampAckMask) | low24;
  if (low < p.acked) low += kStampAckMask + 1;
  if (low <= p.next_index) on_ack(p, low);
}

}  // namespace tributary::transport
