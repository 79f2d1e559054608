#include "transport/failover_link.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"
#include "transport/failover_link_impl.h"

namespace tributary::transport {

FailoverLink::FailoverLink(FailoverParams params,
                           std::vector<std::unique_ptr<algorithms::PollableLink>> paths,
                           int wake_fd)
    : params_(std::move(params)), paths_(std::move(paths)), abort_(wake_fd) {
  TRIB_CHECK(!paths_.empty()) << "a failover link needs a path";
  rank_ = paths_.front()->rank();
  size_ = paths_.front()->size();
  for (const auto& path : paths_) {
    TRIB_CHECK(path->rank() == rank_ && path->size() == size_) << "paths of different groups";
  }
  while (params_.path_names.size() < paths_.size()) {
    params_.path_names.push_back("path " + std::to_string(params_.path_names.size()));
  }
  for (const auto& path : paths_) {
    acked_send_bytes_.push_back(path->polls_best() ? kAckedSendBytesMemory
                                                   : kAckedSendBytesSocket);
  }
  const auto now = params_.clock->now();
  last_round_ = now;
  std::vector<Pair>(static_cast<std::size_t>(size_)).swap(pairs_);  // Pair does not move
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Pair& p = pairs_[static_cast<std::size_t>(r)];
    p.peer = r;
    std::vector<bool> carried(paths_.size());
    for (std::size_t k = 0; k < paths_.size(); ++k) {
      carried[k] = path_carries(params_.path_peers, k, r);
    }
    p.route = PairPaths(carried, now);  // make_failover_link refused a pair without one
    p.resume_h.assign(paths_.size(), kNoHandle);
    p.resume_in.resize(paths_.size());
    p.probe_h.assign(paths_.size(), kNoHandle);
    p.probe_in.resize(paths_.size());
    p.probe_ack_h.assign(paths_.size(), kNoHandle);
    p.probe_ack_in.resize(paths_.size());
    p.probe_answer_h.assign(paths_.size(), kNoHandle);
    p.probe_answer_out.resize(paths_.size());
    p.probe_send_h.assign(paths_.size(), kNoHandle);
    p.probe_out.resize(paths_.size());
    p.progress_at = now;
    p.fast = paths_[static_cast<std::size_t>(p.route.current())]->carries_stamps();
    for (int k = 0; k < static_cast<int>(paths_.size()); ++k) {
      if (p.route.state(k) == PathState::kAbsent) continue;
      post_resume_listener(p, k);
      post_probe_listeners(p, k);
    }
    post_controls(p);
  }
}

FailoverLink::~FailoverLink() {
  // The paths may still hold our control buffers: stop them before the pairs go.
  for (auto& path : paths_) path->abort(error(StatusCode::kAborted, "link destroyed"));
  paths_.clear();
}

void FailoverLink::check_peer(int peer) const {
  TRIB_CHECK(peer >= 0 && peer < size_ && peer != rank_) << "bad peer " << peer;
}

Handle FailoverLink::open_op(bool is_send, int peer, algorithms::Tag tag, std::byte* data,
                             std::size_t size) {
  check_peer(peer);
  const auto space = static_cast<std::uint8_t>(tag.seq >> algorithms::kSeqSpaceShift);
  TRIB_CHECK(space != static_cast<std::uint8_t>(algorithms::SeqSpace::kFailoverPayload) &&
             space != static_cast<std::uint8_t>(algorithms::SeqSpace::kFailoverControl))
      << "sequence number " << tag.seq << " is in the failover link's own space";
  const Handle h = ops_.open();
  CallerOp& op = ops_.at(h);
  op.is_send = is_send;
  op.peer = peer;
  op.tag = tag;
  op.data = data;  // a send never writes through it
  op.size = size;
  op.order = next_order_++;
  const Pair& p = pairs_[static_cast<std::size_t>(peer)];
  // A receive on a lost pair may still take what arrived whole before (receive()).
  if (abort_.raised() || (!p.lost.is_ok() && is_send)) {
    finish(h, abort_.raised() ? abort_.status() : p.lost);
  }
  return h;
}

Handle FailoverLink::send(int peer, algorithms::Tag tag, std::span<const std::byte> data) {
  const Handle h = open_op(true, peer, tag, const_cast<std::byte*>(data.data()), data.size());
  Pair& p = pairs_[static_cast<std::size_t>(peer)];
  if (ops_.at(h).done) return h;
  if (p.acked == p.next_index) p.progress_at = params_.clock->now();
  Outgoing& o = p.out.emplace_back();
  o.index = p.next_index++;
  o.tag = tag;
  o.data = data.data();
  o.size = data.size();
  o.op = h;
  if (!p.awaiting_resume) post_out(p, o);
  return h;
}

Handle FailoverLink::recv(int peer, algorithms::Tag tag, std::span<std::byte> data) {
  return receive(peer, tag, data, std::nullopt);
}

Handle FailoverLink::recv_combine(int peer, algorithms::Tag tag, std::span<std::byte> data,
                                  const algorithms::Combine& c) {
  TRIB_CHECK(combines()) << "recv_combine() on a failover link whose first path does not combine";
  TRIB_CHECK(data.size() % dtype_size(c.dtype) == 0) << "partial element";
  return receive(peer, tag, data, c);
}

Handle FailoverLink::receive(int peer, algorithms::Tag tag, std::span<std::byte> data,
                             const std::optional<algorithms::Combine>& combine) {
  const Handle h = open_op(false, peer, tag, data.data(), data.size());
  Pair& p = pairs_[static_cast<std::size_t>(peer)];
  ops_.at(h).combine = combine;
  if (ops_.at(h).done) return h;
  if (!p.lost.is_ok()) {
    // Every path failed, but what arrived whole before is delivered, as a plain link
    // delivers what arrived before its connection closed (lose_pair keeps it).
    match_or_fail(p, h);
    return h;
  }
  if (p.fast) {
    post_fast(p, h);
    return h;
  }
  p.posted.push_back(h);
  match_posted(p, h);
  return h;
}

void FailoverLink::match_posted(Pair& p, Handle h) {
  CallerOp& op = ops_.at(h);
  auto it = std::find_if(p.arrivals.begin(), p.arrivals.end(), [&](const Arrival& a) {
    return !a.discard && a.target == kNoHandle && a.tag == op.tag;
  });
  if (it == p.arrivals.end()) return;
  std::erase(p.posted, h);
  if (it->length != op.size || it->tag.check != op.tag.check) {
    PendingOp view;
    view.tag = op.tag;
    view.size = op.size;
    finish(h, match_status(pair_name(p), view, it->length, it->tag.check));
    it->discard = true;  // read on, so the stream stays whole; nobody takes it
    if (it->complete) p.arrivals.erase(it);
    return;
  }
  op.attached = true;
  it->target = h;
  if (it->complete) {
    on_arrival(*it);
    pool_.give_back(std::move(it->buffer));
    p.arrivals.erase(it);
  }
}

void FailoverLink::match_or_fail(Pair& p, Handle h) {
  p.posted.push_back(h);
  match_posted(p, h);
  if (ops_.at(h).done) return;
  std::erase(p.posted, h);
  finish(h, p.lost);
}

void FailoverLink::finish(Handle h, Status st) {
  CallerOp& op = ops_.at(h);
  op.done = true;
  op.status = std::move(st);
}

Status FailoverLink::wait(Handle h, Deadline deadline) {
  CallerOp* found = ops_.find(h);
  TRIB_CHECK(found != nullptr) << "unknown or already waited handle " << h;
  CallerOp& op = *found;
  Pair& p = pairs_[static_cast<std::size_t>(op.peer)];
  auto window = [&] {
    if (paths_[static_cast<std::size_t>(p.route.current())]->polls_best())
      return params_.memory_busy_poll;
    return params_.core_per_rank ? params_.core_per_rank_busy_poll : params_.busy_poll;
  };
  // One reading of the clock a round (a system call's worth on some VMs: 50 ns here).
  auto now = std::chrono::steady_clock::now();
  auto spin_until = now + window();
  for (;;) {
    if (!op.done && abort_.raised()) finish(h, abort_.status());
    const std::uint64_t before = completions_;
    moved_ = false;
    int looked = -1;
    if (!op.done && !poll_own(h, op, now, &looked)) service(now, looked);
    if (op.done) break;
    now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) return give_up(h, op);
    algorithms::PollableLink& path = *paths_[static_cast<std::size_t>(p.route.current())];
    if (moved_ || completions_ != before) {
      // Something moved: keep polling, as the links do (a sleep would cost the next
      // message a wake-up, over shared memory a doorbell too).
      spin_until = now + window();
    } else if (now < spin_until) {
      // When ranks outnumber cores the peer may need this very core.
      if (!params_.core_per_rank) {
        sched_yield();
        now = std::chrono::steady_clock::now();
      }
    } else {
      const Deadline slice{std::min(deadline.at, now + params_.slice)};
      path.drive(slice);
      now = std::chrono::steady_clock::now();
    }
  }
  if (op.is_send) {
    // Kept until acknowledged: from now on in a copy, the caller's buffer is theirs again.
    for (Outgoing& o : p.out) {
      if (o.op != h) continue;
      o.op = kNoHandle;
      if (o.index >= p.acked) keep_copy(o);
    }
  }
  Status st = std::move(op.status);
  ops_.erase(h);
  return st;
}

bool FailoverLink::poll_own(Handle h, const CallerOp& op, std::chrono::steady_clock::time_point now,
                            int* looked) {
  Pair& p = pairs_[static_cast<std::size_t>(op.peer)];
  if (!p.fast || !p.lost.is_ok() || now - last_service_ >= kOwnLookWindow) return false;
  const int c = p.route.current();
  if (paths_[static_cast<std::size_t>(c)]->look()) moved_ = true;
  *looked = c;
  if (op.is_send) {
    for (Outgoing& o : p.out) {
      if (o.op != h) continue;
      if (o.path == c) (void)step_out(p, o);
      break;
    }
  } else {
    for (std::size_t i = 0; i < p.arrivals.size(); ++i) {
      const Arrival& a = p.arrivals[i];
      if (a.target != h) continue;
      if (a.fast) (void)step_fast(p, i);
      break;
    }
  }
  return op.done;
}

Status FailoverLink::give_up(Handle h, CallerOp& op) {
  Pair& p = pairs_[static_cast<std::size_t>(op.peer)];
  PendingOp view;
  view.is_send = op.is_send;
  view.tag = op.tag;
  view.size = op.size;
  Status st = timed_out(pair_name(p), view);
  if (op.is_send) {
    for (Outgoing& o : p.out) {
      if (o.op != h) continue;
      o.op = kNoHandle;
      if (o.path >= 0) cancel(o.path, o.data_h);  // never touches the buffer again
      keep_copy(o);
    }
  } else {
    std::erase(p.posted, h);
    for (auto it = p.arrivals.begin(); it != p.arrivals.end(); ++it) {
      if (it->target != h) continue;
      if (it->under != kNoHandle) cancel(p.route.current(), it->under);
      p.arrivals.erase(it);
      break;
    }
  }
  ops_.erase(h);
  return st;
}

Status FailoverLink::drain(Deadline deadline) {
  for (;;) {
    if (abort_.raised()) return abort_.status();
    service(std::chrono::steady_clock::now());
    // What this side received is acknowledged now, not when a message would carry it:
    // there may be none.
    for (Pair& p : pairs_) {
      if (p.peer >= 0) maybe_ack(p, true);
    }
    const Pair* pending = nullptr;
    for (const Pair& p : pairs_) {
      if (p.peer < 0 || p.acked >= p.next_index) continue;
      // A pair lost with nothing outstanding (a peer that left when done) is no error here.
      if (!p.lost.is_ok()) return p.lost;
      if (pending == nullptr) pending = &p;
    }
    if (pending == nullptr) return Status();
    const auto now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) {
      return error(StatusCode::kTimedOut, pair_name(*pending) + " has not acknowledged " +
                                              std::to_string(pending->next_index - pending->acked) +
                                              " message(s) before the deadline");
    }
    paths_[static_cast<std::size_t>(pending->route.current())]->drive(
        Deadline{std::min(deadline.at, now + params_.slice)});
  }
}

Result<std::unique_ptr<algorithms::PollableLink>> as_path(std::unique_ptr<algorithms::Link> link) {
  auto* pollable = dynamic_cast<algorithms::PollableLink*>(link.get());
  if (pollable == nullptr) {
    return error(StatusCode::kInternal, "this transport's link cannot be a failover path");
  }
  link.release();
  return std::unique_ptr<algorithms::PollableLink>(pollable);
}

Status drain(algorithms::Link& link, Deadline deadline) {
  auto* failover = dynamic_cast<FailoverLink*>(&link);
  return failover == nullptr ? Status::ok() : failover->drain(deadline);
}

void FailoverLink::abort(const Status& reason) {
  if (!abort_.raise(reason)) return;
  const Status st = abort_.status();
  for (auto& path : paths_) path->abort(st);
}

std::string FailoverLink::pair_name(const Pair& p) const { return name_of(p.peer); }

std::string FailoverLink::name_of(int rank) const {
  const auto r = static_cast<std::size_t>(rank);
  if (r < params_.rank_names.size() && !params_.rank_names[r].empty()) {
    return params_.rank_names[r];
  }
  return "rank " + std::to_string(rank);
}

Result<std::unique_ptr<algorithms::Link>> make_failover_link(
    FailoverParams params, std::vector<std::unique_ptr<algorithms::PollableLink>> paths) {
  if (paths.empty()) return error(StatusCode::kInvalidArgument, "a failover link needs a path");
  TRIB_RETURN_IF_ERROR(check_path_peers(params.path_peers, paths.size(), paths.front()->rank(),
                                        paths.front()->size()));
  TRIB_ASSIGN_OR_RETURN(int wake, make_wake_fd());
  return std::unique_ptr<algorithms::Link>(
      std::make_unique<FailoverLink>(std::move(params), std::move(paths), wake));
}

}  // namespace tributary::transport
