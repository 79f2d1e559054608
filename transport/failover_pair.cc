// The pair protocol of FailoverLink (failover_link.h): descriptors, acknowledgements,
// resumes, and moving a pair from one path to the next.
#include <algorithm>
#include <cstring>
#include <utility>

#include "core/reduce.h"
#include "core/little_endian.h"
#include "transport/failover_link_impl.h"

namespace tributary::transport {
namespace {

algorithms::Tag control_tag(Control c) { return {kControlSeq, static_cast<std::uint32_t>(c), 0}; }

algorithms::Tag payload_tag(std::uint64_t index, std::uint32_t generation) {
  return {algorithms::seq_in(algorithms::SeqSpace::kFailoverPayload, index), generation,
          kPayloadCheck};
}

}  // namespace

bool FailoverLink::busy(const Pair& p) const {
  return !p.posted.empty() || !p.arrivals.empty() || p.acked < p.next_index;
}

std::optional<Status> FailoverLink::collect(int path, Handle& h, std::uint64_t* stamp) {
  if (h == kNoHandle) return std::nullopt;
  algorithms::PollableLink& link = *paths_[static_cast<std::size_t>(path)];
  if (!link.test(h)) return std::nullopt;
  if (stamp != nullptr) *stamp = link.stamp(h);
  Status st = link.wait(h, Deadline{TimePoint::min()});
  h = kNoHandle;
  ++completions_;
  return st;
}

void FailoverLink::cancel(int path, Handle& h) {
  if (h == kNoHandle) return;
  (void)paths_[static_cast<std::size_t>(path)]->wait(h, Deadline{TimePoint::min()});
  h = kNoHandle;
}

void FailoverLink::post_resume_listener(Pair& p, int path) {
  auto& buf = p.resume_in[static_cast<std::size_t>(path)];
  p.resume_h[static_cast<std::size_t>(path)] = paths_[static_cast<std::size_t>(path)]->recv(
      p.peer, control_tag(Control::kResume), std::span<std::byte>(buf));
}

void FailoverLink::post_probe_listeners(Pair& p, int path) {
  const auto k = static_cast<std::size_t>(path);
  p.probe_h[k] = paths_[k]->recv(p.peer, control_tag(Control::kProbe),
                                 std::span<std::byte>(p.probe_in[k]));
  p.probe_ack_h[k] = paths_[k]->recv(p.peer, control_tag(Control::kProbeAck),
                                     std::span<std::byte>(p.probe_ack_in[k]));
}

void FailoverLink::cancel_listeners(Pair& p, int path) {
  const auto k = static_cast<std::size_t>(path);
  cancel(path, p.resume_h[k]);
  cancel(path, p.probe_h[k]);
  cancel(path, p.probe_ack_h[k]);
  cancel(path, p.probe_answer_h[k]);
  cancel(path, p.probe_send_h[k]);
  for (auto it = p.discards.begin(); it != p.discards.end();) {
    if (it->path != path) {
      ++it;
      continue;
    }
    cancel(path, it->h);
    it = p.discards.erase(it);
  }
}

void FailoverLink::post_controls(Pair& p) {
  algorithms::PollableLink& link = *paths_[static_cast<std::size_t>(p.route.current())];
  p.descriptor_h =
      link.recv(p.peer, control_tag(Control::kDescriptor), std::span<std::byte>(p.descriptor_in));
  p.ack_h = link.recv(p.peer, control_tag(Control::kAck), std::span<std::byte>(p.ack_in));
}

void FailoverLink::keep_copy(Outgoing& o) {
  if (o.copy.get() != nullptr || o.size == 0) return;
  o.copy = pool_.take(o.size);
  std::memcpy(o.copy.get(), o.data, o.size);
  o.data = o.copy.get();
}

void FailoverLink::post_out(Pair& p, Outgoing& o) {
  // A resend of a message whose send already completed: the caller may take its buffer
  // back any moment, so it goes from a copy.
  if (o.op != kNoHandle && ops_.at(o.op).done) keep_copy(o);
  algorithms::PollableLink& link = *paths_[static_cast<std::size_t>(p.route.current())];
  o.path = p.route.current();
  o.generation = p.route.generation();
  if (p.fast) {
    // Under the caller's tag, numbered by the stamp: the receive takes it in place.
    o.data_h = link.send_stamped(p.peer, o.tag, std::span<const std::byte>(o.data, o.size),
                                 make_stamp(o.index, p.low));
    if (p.low > p.ack_sent) p.ack_sent = p.low;
    p.ack_due = false;
    p.ack_urgent = false;
    return;
  }
  le::store<std::uint64_t>(o.descriptor.data(), o.index);
  le::store<std::uint64_t>(o.descriptor.data() + 8, o.tag.seq);
  le::store<std::uint32_t>(o.descriptor.data() + 16, o.tag.slot);
  le::store<std::uint32_t>(o.descriptor.data() + 20, o.tag.check);
  le::store<std::uint64_t>(o.descriptor.data() + 24, o.size);
  le::store<std::uint32_t>(o.descriptor.data() + 32, p.route.generation());
  o.descriptor_h = link.send(p.peer, control_tag(Control::kDescriptor), o.descriptor);
  o.data_h = link.send(p.peer, payload_tag(o.index, p.route.generation()),
                       std::span<const std::byte>(o.data, o.size));
}

void FailoverLink::service(std::chrono::steady_clock::time_point now, int looked) {
  last_service_ = now;
  // The stall clock, read once a round (the same reading when it is the steady clock).
  now_ = params_.clock == &SteadyClock::instance() ? now : params_.clock->now();
  if (now_ - last_round_ >= params_.stall_deadline / 2) {
    // Nobody drove this link for that long (the caller computed between collectives):
    // the silence says nothing about the paths, and acknowledgements that wait for the
    // next message back (fast stint) are not late. The stall clocks start again.
    for (Pair& p : pairs_) p.progress_at = now_;
  }
  last_round_ = now_;
  if (params_.reconnects && params_.reconnects->pending()) take_reconnections();
  // The paths some pair is on, every time; the others (where only a resume or a probe can
  // arrive) once a standby_look, so that polling stays cheap.
  const bool all = now - last_full_look_ >= params_.standby_look;
  if (all) last_full_look_ = now;
  full_look_ = all;
  for (std::size_t k = 0; k < paths_.size(); ++k) {
    bool used = all;
    for (std::size_t r = 0; !used && r < pairs_.size(); ++r) {
      used = pairs_[r].peer >= 0 && pairs_[r].route.current() == static_cast<int>(k);
    }
    if (used && static_cast<int>(k) != looked && paths_[k]->look()) moved_ = true;
  }
  for (Pair& p : pairs_) {
    if (p.peer < 0 || !p.lost.is_ok()) continue;
    if (p.stranded_until) {
      // No path to service: a new connection (take_reconnections) or the end of the wait.
      expire_stranded(p);
      continue;
    }
    if (!all && quiet(p)) {
      // Nothing of ours under way with this peer: only what it sent before a receive
      // was posted (a large one's sender waits for its acknowledgement) is looked for
      // every round; the rest (a failed path, a resume) once a standby_look.
      collect_early(p);
      continue;
    }
    service_pair(p);
  }
}

bool FailoverLink::quiet(const Pair& p) const {
  return p.fast && !busy(p) && p.out.empty() && p.low <= p.ack_sent && !p.ack_urgent &&
         p.ack_send_h == kNoHandle && p.notes.empty();
}

void FailoverLink::service_pair(Pair& p) {
  const int before = p.route.current();
  service_controls(p);
  if (!p.lost.is_ok() || p.route.current() != before) return;
  if (p.fast) collect_early(p);
  service_arrivals(p);
  if (!p.lost.is_ok() || p.route.current() != before) return;
  service_sends(p);
  if (!p.lost.is_ok() || p.route.current() != before) return;
  // One that waited for a message back may be due by now; one wanted at once may have
  // waited for the last to go out.
  maybe_ack(p, p.ack_urgent);
  check_stall(p);
  if (!p.lost.is_ok() || p.route.current() != before) return;
  service_probes(p);
  if (!p.lost.is_ok() || p.route.current() != before) return;
  maybe_probe(p);
}

void FailoverLink::service_probes(Pair& p) {
  // Probes and their answers are for paths the pair is not on: looked at once a
  // standby_look, like those paths themselves, so that the steady state pays nothing for them.
  if (!full_look_) return;
  for (int k = 0; k < static_cast<int>(paths_.size()); ++k) {
    const auto i = static_cast<std::size_t>(k);
    if (!connected(p.route.state(k))) continue;
    // A listener or a probe's send failing on the current path is also seen, in order,
    // by its descriptor and acknowledgement receives (service_controls): left to them.
    auto failed = [&](const std::optional<Status>& st) {
      return st && !st->is_ok() && k != p.route.current();
    };
    if (std::optional<Status> st = collect(k, p.probe_h[i])) {
      if (failed(st)) return fail_path(p, k, *st, false);
      if (st->is_ok()) {
        // Answer with the generation the probe carried: the prober moves back only on an
        // answer to a probe of its current generation.
        if (std::optional<Status> prev = collect(k, p.probe_answer_h[i]); failed(prev)) {
          return fail_path(p, k, *prev, false);
        }
        if (p.probe_answer_h[i] == kNoHandle) {
          p.probe_answer_out[i] = p.probe_in[i];
          p.probe_answer_h[i] = paths_[i]->send(p.peer, control_tag(Control::kProbeAck),
                                                std::span<const std::byte>(p.probe_answer_out[i]));
        }
        p.probe_h[i] = paths_[i]->recv(p.peer, control_tag(Control::kProbe),
                                       std::span<std::byte>(p.probe_in[i]));
      }
    }
    if (std::optional<Status> st = collect(k, p.probe_answer_h[i]); failed(st)) {
      return fail_path(p, k, *st, false);
    }
    if (std::optional<Status> st = collect(k, p.probe_send_h[i]); failed(st)) {
      return fail_path(p, k, *st, false);
    }
    for (auto it = p.discards.begin(); it != p.discards.end();) {
      // A stale payload read and dropped (its receive ends with a length mismatch), or
      // the path failed under it: either way nothing more to do.
      it = it->path == k && collect(k, it->h) ? p.discards.erase(it) : std::next(it);
    }
    if (std::optional<Status> st = collect(k, p.probe_ack_h[i])) {
      if (failed(st)) return fail_path(p, k, *st, false);
      if (!st->is_ok()) continue;
      const std::uint32_t generation = le::load<std::uint32_t>(p.probe_ack_in[i].data());
      p.probe_ack_h[i] = paths_[i]->recv(p.peer, control_tag(Control::kProbeAck),
                                         std::span<std::byte>(p.probe_ack_in[i]));
      if (p.route.on_probe_answer(k, generation)) {
        return move_to(p, k, p.route.generation() + 1, "a probe was answered on it", false, false,
                       true);
      }
    }
  }
}

void FailoverLink::maybe_probe(Pair& p) {
  if (!p.route.probe_due(now_, params_.probe_interval)) return;
  bool probed = false;
  for (int k = 0; k < p.route.current(); ++k) {
    const auto i = static_cast<std::size_t>(k);
    // One probe in flight per path: a path that still holds the last one gets no other.
    if (!p.route.wants_probe(k) || p.probe_send_h[i] != kNoHandle) continue;
    le::store<std::uint32_t>(p.probe_out[i].data(), p.route.generation());
    p.probe_send_h[i] = paths_[i]->send(p.peer, control_tag(Control::kProbe),
                                        std::span<const std::byte>(p.probe_out[i]));
    probed = true;
  }
  if (probed) p.route.probed(now_);
}

void FailoverLink::service_controls(Pair& p) {
  // First what the current path delivered: a peer that closes its connections after its
  // last send (a member leaving at a step boundary, or done with the collective) leaves
  // descriptors, payloads and acknowledgements readable before the close, which fails
  // every receive still posted. Its error is acted on after them, as a plain link's
  // receives match what arrived before a close.
  const int c = p.route.current();
  std::optional<Status> failure;
  while (std::optional<Status> st = collect(c, p.descriptor_h)) {
    if (!st->is_ok()) {
      failure = *st;
      break;
    }
    on_descriptor(p);
    if (p.route.current() != c || !p.lost.is_ok()) return;
    p.descriptor_h = paths_[static_cast<std::size_t>(c)]->recv(
        p.peer, control_tag(Control::kDescriptor), std::span<std::byte>(p.descriptor_in));
  }
  while (std::optional<Status> st = collect(c, p.ack_h)) {
    if (!st->is_ok()) {
      if (!failure) failure = *st;
      break;
    }
    on_ack(p, le::load<std::uint64_t>(p.ack_in.data()));
    p.ack_h = paths_[static_cast<std::size_t>(c)]->recv(p.peer, control_tag(Control::kAck),
                                                        std::span<std::byte>(p.ack_in));
  }
  if (failure) {
    service_arrivals(p);
    if (p.route.current() != c || !p.lost.is_ok()) return;
    return fail_path(p, c, *failure, false);
  }
  for (int k = 0; k < static_cast<int>(paths_.size()); ++k) {
    if (!connected(p.route.state(k))) continue;
    // The other paths moved bytes only if this round looked at them.
    if (k != c && !full_look_) continue;
    std::optional<Status> st = collect(k, p.resume_h[static_cast<std::size_t>(k)]);
    if (!st) continue;
    if (!st->is_ok()) {
      if (k == c) {  // payloads that arrived before the close are delivered first
        service_arrivals(p);
        if (p.route.current() != c || !p.lost.is_ok()) return;
      }
      return fail_path(p, k, *st, false);
    }
    const auto& in = p.resume_in[static_cast<std::size_t>(k)];
    const std::uint32_t said = le::load<std::uint32_t>(in.data());
    const std::uint32_t generation = le::load<std::uint32_t>(in.data() + 4);
    const std::uint64_t low = le::load<std::uint64_t>(in.data() + 8);
    if (said != static_cast<std::uint32_t>(k)) {
      return fail_path(p, k, error(StatusCode::kBadFrame, "a resume for another path"), false);
    }
    post_resume_listener(p, k);
    return on_resume(p, k, generation, low);
  }
  if (p.resume_send_h != kNoHandle) {
    const int path = p.resume_send_path;
    if (std::optional<Status> st = collect(path, p.resume_send_h); st && !st->is_ok()) {
      return fail_path(p, path, *st, false);
    }
  }
  if (std::optional<Status> st = collect(c, p.ack_send_h)) {
    if (!st->is_ok()) return fail_path(p, c, *st, false);
  }
}

void FailoverLink::on_descriptor(Pair& p) {
  const std::byte* d = p.descriptor_in.data();
  Arrival a;
  a.index = le::load<std::uint64_t>(d);
  a.tag = algorithms::Tag{le::load<std::uint64_t>(d + 8), le::load<std::uint32_t>(d + 16), le::load<std::uint32_t>(d + 20)};
  a.length = le::load<std::uint64_t>(d + 24);
  const std::uint32_t generation = le::load<std::uint32_t>(d + 32);
  if (a.length > params_.max_message_bytes ||
      (a.tag.seq >> algorithms::kSeqSpaceShift) >=
          static_cast<std::uint8_t>(algorithms::SeqSpace::kFailoverPayload)) {
    return fail_path(p, p.route.current(), error(StatusCode::kBadFrame, "a malformed descriptor"),
                     false);
  }
  if (generation != p.route.generation()) {
    // Left on this path by an earlier stint (the pair moved away and back): its message
    // was resent since under the current generation. Its payload, if it was sent at all,
    // is read and dropped by a receive that wants no bytes (a length mismatch).
    p.discards.push_back(
        {p.route.current(), paths_[static_cast<std::size_t>(p.route.current())]->recv(
                                p.peer, payload_tag(a.index, generation), std::span<std::byte>())});
    return;
  }
  p.progress_at = now_;
  std::byte* dst = nullptr;
  a.discard = a.index < p.low || p.above.count(a.index) > 0;
  if (!a.discard) {
    auto it = std::find_if(p.posted.begin(), p.posted.end(),
                           [&](Handle h) { return ops_.at(h).tag == a.tag; });
    if (it != p.posted.end()) {
      const Handle h = *it;
      p.posted.erase(it);
      CallerOp& op = ops_.at(h);
      if (a.length != op.size || a.tag.check != op.tag.check) {
        PendingOp view;
        view.tag = op.tag;
        view.size = op.size;
        finish(h, match_status(pair_name(p), view, a.length, a.tag.check));
        a.discard = true;
      } else {
        op.attached = true;
        a.target = h;
        if (!op.combine) dst = op.data;  // a combining one is reduced from the buffer
      }
    }
  }
  if (dst == nullptr) {
    a.buffer = pool_.take(static_cast<std::size_t>(a.length));
    dst = a.buffer.get();
  }
  a.under = paths_[static_cast<std::size_t>(p.route.current())]->recv(
      p.peer, payload_tag(a.index, generation),
      std::span<std::byte>(dst, static_cast<std::size_t>(a.length)));
  p.arrivals.push_back(std::move(a));
}

void FailoverLink::service_arrivals(Pair& p) {
  for (std::size_t i = 0; i < p.arrivals.size();) {
    Arrival& a = p.arrivals[i];
    if (a.fast) {
      const Step step = step_fast(p, i);
      if (step == Step::kPathFailed) return;
      if (step == Step::kPending) ++i;
      continue;
    }
    std::optional<Status> st = a.complete ? std::nullopt : collect(p.route.current(), a.under);
    if (!st) {
      ++i;
      continue;
    }
    if (!st->is_ok()) return fail_path(p, p.route.current(), *st, false);
    a.complete = true;
    p.progress_at = now_;
    mark_received(p, a.index);
    if (a.discard || a.target != kNoHandle) {
      on_arrival(a);
      pool_.give_back(std::move(a.buffer));
      p.arrivals.erase(p.arrivals.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  maybe_ack(p);
}

void FailoverLink::on_arrival(Arrival& a) {
  if (a.discard || a.target == kNoHandle) return;
  CallerOp& op = ops_.at(a.target);
  if (a.buffer.get() != nullptr && a.length > 0) {
    if (op.combine) {
      const algorithms::Combine& c = *op.combine;
      const std::size_t count = a.length / dtype_size(c.dtype);
      const std::byte* in = a.buffer.get();
      reduce_to(op.data, c.incoming_first ? in : c.operand, c.incoming_first ? c.operand : in,
                count, c.dtype, c.op);
    } else {
      std::memcpy(op.data, a.buffer.get(), a.length);
    }
  }
  finish(a.target, Status());
}

void FailoverLink::mark_received(Pair& p, std::uint64_t index) {
  if (index < p.low || p.above.count(index) > 0) return;
  if (index != p.low) {
    p.above.insert(index);
    return;
  }
  ++p.low;
  while (p.above.erase(p.low) > 0) ++p.low;
}

void FailoverLink::maybe_ack(Pair& p, bool now) {
  if (p.low <= p.ack_sent || !p.lost.is_ok()) return;
  if (p.fast && !now) {
    // The next message back will carry it; an ack of its own only when too much, or for
    // too long, went unacknowledged (a ring sends nothing back to its left neighbour).
    if (!p.ack_due) {
      p.ack_due = true;
      p.ack_due_since = now_;
    }
    if (p.low - p.ack_sent < params_.ack_every && now_ - p.ack_due_since < params_.ack_delay) {
      return;
    }
  }
  if (p.ack_send_h != kNoHandle) {
    // The last one is still going out: a sender may be waiting for this one (a large
    // message's send completes with it), so it goes as soon as the last is out.
    if (now) p.ack_urgent = true;
    return;
  }
  p.ack_urgent = false;
  le::store<std::uint64_t>(p.ack_out.data(), p.low);
  p.ack_send_h = paths_[static_cast<std::size_t>(p.route.current())]->send(
      p.peer, control_tag(Control::kAck), std::span<const std::byte>(p.ack_out));
  p.ack_sent = p.low;
  p.ack_due = false;
}

void FailoverLink::on_ack(Pair& p, std::uint64_t low) {
  if (low <= p.acked) return;
  p.acked = std::min(low, p.next_index);
  p.progress_at = now_;
  release_acknowledged(p);
}

void FailoverLink::release_acknowledged(Pair& p) {
  for (Outgoing& o : p.out) {
    if (o.index >= p.acked) break;
    // Received by the peer; the caller may have its buffer back once no path still reads it.
    if (o.op != kNoHandle && o.data_h == kNoHandle && !ops_.at(o.op).done) finish(o.op, Status());
  }
  drop_acknowledged(p);
}

void FailoverLink::drop_acknowledged(Pair& p) {
  // Acknowledged, no path reads it, and its caller's send is over (or finished): gone.
  while (!p.out.empty()) {
    const Outgoing& o = p.out.front();
    if (o.index >= p.acked || o.descriptor_h != kNoHandle || o.data_h != kNoHandle) break;
    if (o.op != kNoHandle && !ops_.at(o.op).done) break;
    pool_.give_back(std::move(p.out.front().copy));
    p.out.pop_front();
  }
}

void FailoverLink::service_sends(Pair& p) {
  const int c = p.route.current();
  for (Outgoing& o : p.out) {
    if (o.path == c && step_out(p, o) == Step::kPathFailed) return;
  }
  drop_acknowledged(p);
}

FailoverLink::Step FailoverLink::step_out(Pair& p, Outgoing& o) {
  const int c = p.route.current();
  if (std::optional<Status> st = collect(c, o.descriptor_h); st && !st->is_ok()) {
    fail_path(p, c, *st, false);
    return Step::kPathFailed;
  }
  std::optional<Status> st = collect(c, o.data_h);
  if (!st) return Step::kPending;
  if (!st->is_ok()) {
    fail_path(p, c, *st, false);
    return Step::kPathFailed;
  }
  // A large one of the fast stint finishes with its acknowledgement (release_acknowledged):
  // until then the caller's buffer is the copy a resend would read.
  const bool awaits_ack =
      p.fast && o.size >= acked_send_bytes_[static_cast<std::size_t>(c)] && o.index >= p.acked;
  if (o.op != kNoHandle && !ops_.at(o.op).done && !awaits_ack) finish(o.op, Status());
  return Step::kDone;
}

void FailoverLink::check_stall(Pair& p) {
  if (p.acked >= p.next_index && !p.awaiting_resume) return;
  if (!p.route.may_leave_for_stall())
    return;  // the pair's last path: the caller's deadline decides
  const Duration quiet = now_ - p.progress_at;
  if (quiet < params_.stall_deadline) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(quiet).count();
  fail_path(p, p.route.current(),
            error(StatusCode::kTimedOut,
                  "no acknowledgement from " + pair_name(p) + " for " + std::to_string(ms) + " ms"),
            true);
}

void FailoverLink::on_resume(Pair& p, int path, std::uint32_t generation, std::uint64_t low) {
  switch (p.route.on_resume(path, generation)) {
    case PairPaths::Resume::kStale: return;
    case PairPaths::Resume::kFollow:
      move_to(p, path, generation, pair_name(p) + " resumed on it", false, true);
      break;
    case PairPaths::Resume::kAccept: break;
  }
  if (low > p.acked) on_ack(p, low);
  p.awaiting_resume = false;
  p.progress_at = now_;
  for (Outgoing& o : p.out) {
    if (o.path != p.route.current() && o.index >= p.acked) post_out(p, o);
  }
}

void FailoverLink::fail_path(Pair& p, int path, const Status& why, bool stall) {
  const PairPaths::Failure f = p.route.on_failure(path, stall);
  using Verdict = PairPaths::Failure::Verdict;
  if (f.verdict == Verdict::kIgnored) return;
  if (f.down) {
    // Its connection failed: gone until a new one is put in (on_down). (A stall of the
    // pair's path keeps its listeners, for the peer's probes and resumes.)
    cancel_listeners(p, path);
    if (params_.on_down && !abort_.raised()) params_.on_down(path, p.peer);
  }
  switch (f.verdict) {
    case Verdict::kStandby: {
      // kUnavailable: a path that was never connected for the pair, as its transport said
      // when the link was made (a mixed group's TCP fallback, dialled now): expected.
      const bool news = busy(p) && why.code() != StatusCode::kUnavailable;
      params_.log.log(news ? LogLevel::kWarn : LogLevel::kDebug,
                      "epoch " + std::to_string(params_.epoch) + ": " + name_of(rank_) + " to " +
                          pair_name(p) + ": standby path " +
                          params_.path_names[static_cast<std::size_t>(path)] +
                          " failed: " + why.to_string());
      return;
    }
    case Verdict::kMove: return move_to(p, f.to, f.generation, why.to_string(), stall, false);
    case Verdict::kLost:
      leave_current(p);
      if (f.down && p.read_back.is_ok() && may_strand()) return strand(p, why);
      return lose_pair(p, why);
    case Verdict::kIgnored: return;
  }
}

void FailoverLink::leave_current(Pair& p) {
  if (p.fast) end_fast(p);
  const int c = p.route.current();
  cancel(c, p.descriptor_h);
  cancel(c, p.ack_h);
  cancel(c, p.ack_send_h);
  if (p.resume_send_path == c) cancel(c, p.resume_send_h);
  for (auto it = p.arrivals.begin(); it != p.arrivals.end();) {
    if (it->complete) {
      ++it;
      continue;
    }
    cancel(c, it->under);
    if (it->target != kNoHandle) {
      ops_.at(it->target).attached = false;
      p.posted.push_back(it->target);
    }
    it = p.arrivals.erase(it);
  }
  std::sort(p.posted.begin(), p.posted.end(),
            [&](Handle a, Handle b) { return ops_.at(a).order < ops_.at(b).order; });
  for (Outgoing& o : p.out) {
    if (o.path == c) {
      cancel(c, o.descriptor_h);
      cancel(c, o.data_h);
    }
    o.path = -1;
  }
  // A message acknowledged while its path still read it was waiting for that read to end
  // (service_sends) before its send finished: the path is gone, so it finishes now (no
  // resume will name it again: the peer's resume starts at or above the acknowledgement).
  release_acknowledged(p);
}

void FailoverLink::move_to(Pair& p, int path, std::uint32_t generation, const std::string& reason,
                           bool stall, bool by_peer, bool recovery) {
  const int from = p.route.current();
  // Back up to a path that answers again: this side's probe, or the peer's move up (a
  // move down to a stalled path, every better one having failed, is no recovery).
  const bool recovered = recovery || (by_peer && path < from);
  leave_current(p);
  if (!p.read_back.is_ok()) return lose_pair(p, p.read_back);
  p.route.enter(path, generation, now_);
  p.awaiting_resume = true;
  p.progress_at = now_;
  post_controls(p);
  if (p.resume_send_h != kNoHandle) cancel(p.resume_send_path, p.resume_send_h);
  le::store<std::uint32_t>(p.resume_out.data(), static_cast<std::uint32_t>(path));
  le::store<std::uint32_t>(p.resume_out.data() + 4, generation);
  le::store<std::uint64_t>(p.resume_out.data() + 8, p.low);
  p.resume_send_h = paths_[static_cast<std::size_t>(path)]->send(
      p.peer, control_tag(Control::kResume), std::span<const std::byte>(p.resume_out));
  p.resume_send_path = path;
  p.ack_sent = p.low;
  const auto& names = params_.path_names;
  params_.log.warn("epoch " + std::to_string(params_.epoch) + ": " + name_of(rank_) +
                   " to " + pair_name(p) + ": path " + names[static_cast<std::size_t>(from)] +
                   " -> " + names[static_cast<std::size_t>(path)] + " (" +
                   (stall       ? "stall"
                    : by_peer   ? "peer moved"
                    : recovered ? "recovered"
                                : "error") +
                   ": " + reason + "); resuming at message " + std::to_string(p.low) +
                   " of the peer's");
  if (params_.on_change) {
    params_.on_change(PathChange{p.peer, from, path, reason, stall, by_peer, recovered});
  }
}

void FailoverLink::lose_pair(Pair& p, const Status& last) {
  p.stranded_until.reset();
  const std::string tried = std::to_string(p.route.carrying()) + " path(s)";
  p.lost = error(last.code(), last.message() + " (every path to " + pair_name(p) +
                                  " has failed: " + tried + ")");
  params_.log.log(busy(p) ? LogLevel::kWarn : LogLevel::kDebug,
                  "epoch " + std::to_string(params_.epoch) + ": " + name_of(rank_) +
                      " to " + pair_name(p) + ": no path left: " + p.lost.to_string());
  if (params_.on_change) {
    params_.on_change(PathChange{p.peer, p.route.current(), -1, last.to_string(), false, false});
  }
  for (int k = 0; k < static_cast<int>(paths_.size()); ++k) cancel_listeners(p, k);
  if (p.resume_send_h != kNoHandle) cancel(p.resume_send_path, p.resume_send_h);
  // A receive posted now, or later, still takes a message that arrived whole (a peer that
  // returned and closed every path had sent it): only the others fail.
  const std::vector<Handle> waiting = std::exchange(p.posted, {});
  for (auto it = p.arrivals.begin(); it != p.arrivals.end();) {
    if (it->complete && it->target == kNoHandle && !it->discard) {
      ++it;
      continue;
    }
    if (it->target != kNoHandle) finish(it->target, p.lost);
    pool_.give_back(std::move(it->buffer));
    it = p.arrivals.erase(it);
  }
  for (Handle h : waiting) match_or_fail(p, h);
  for (Outgoing& o : p.out) {
    if (o.op != kNoHandle && !ops_.at(o.op).done) finish(o.op, p.lost);
  }
}

}  // namespace tributary::transport
