// The bookkeeping that every stream-like Link shares (transport/tcp/tcp_link.h over sockets,
// shm_link.h over rings): the table of operations in flight addressed by
// generation-checked handles, the sticky abort status with its wake-up eventfd, and what
// happens to a peer's queued operations when its connection fails or a wait gives up.
//
// Threading: everything here belongs to the link's owner thread, except AbortState,
// which any thread may raise.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/link.h"
#include "core/check.h"
#include "core/log.h"
#include "transport/payload_pool.h"

namespace tributary::transport {

// One posted send or receive. A link's own Op type derives from it (adding its header).
struct PendingOp {
  std::uint32_t generation = 0;
  bool in_use = false;
  bool is_send = false;
  bool done = false;
  bool orphan = false;  // its wait() gave up mid-message: finish from `owned`, then free
  int peer = -1;
  algorithms::Tag tag;
  std::byte* data = nullptr;
  std::size_t size = 0;
  Status status;
  std::unique_ptr<std::byte[]> owned;
  std::optional<algorithms::Combine> combine;  // a receive that combines (recv_combine)
  // A send's stamp (send_stamped), or the stamp of the message a receive took
  // (algorithms/pollable_link.h); 0 where none was given.
  std::uint64_t stamp = 0;

  void finish(Status st) {
    done = true;
    status = std::move(st);
  }
};

// A message that arrived before its receive was posted; back() of a peer's queue may
// still be arriving.
struct EarlyMessage {
  algorithms::Tag tag;
  std::uint64_t length = 0;
  std::uint64_t stamp = 0;  // its sender's (PendingOp::stamp)
  PayloadPool::Buffer bytes;
  bool complete = false;
  bool reported = false;  // PollableLink::report_early told of it
  // The shared-memory link's single-copy message: no bytes here, they are read from the
  // sender's memory at `remote` when the receive is posted, then `token` acknowledged; or,
  // when the receiver would otherwise sleep first, into `bytes` (single_copy cleared).
  bool single_copy = false;
  std::uint64_t remote = 0;
  std::uint64_t token = 0;

  // Still delivered to a receive posted after the link was aborted, as after its peer's
  // connection failed: a protocol over the link may have counted it as received already
  // (the failover link's early arrivals, read back from a path it left).
  bool deliverable_after_abort() const { return complete && !single_copy; }
};

// The first abort() wins; every later operation fails with its status, and a blocked
// wait() wakes through the eventfd.
class AbortState {
 public:
  // Takes ownership of `wake_fd` (an eventfd).
  explicit AbortState(int wake_fd) : wake_fd_(wake_fd) {}
  ~AbortState();
  AbortState(const AbortState&) = delete;
  AbortState& operator=(const AbortState&) = delete;

  // Records `reason` (ok: a plain kAborted) if nothing was recorded yet, and wakes the
  // waiter. True for the call that recorded it.
  bool raise(const Status& reason);
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  Status status() const;
  int wake_fd() const { return wake_fd_; }

 private:
  int wake_fd_;
  mutable std::mutex mu_;
  std::atomic<bool> raised_{false};
  Status status_;  // guarded by mu_
};

template <typename Op>
class OpTable {
 public:
  std::uint32_t alloc(bool is_send, int peer, algorithms::Tag tag, std::byte* data,
                      std::size_t size) {
    std::uint32_t i;
    if (free_.empty()) {
      i = static_cast<std::uint32_t>(ops_.size());
      ops_.emplace_back();
    } else {
      i = free_.back();
      free_.pop_back();
    }
    Op& op = ops_[i];
    op.in_use = true;
    op.is_send = is_send;
    op.done = op.orphan = false;
    op.peer = peer;
    op.tag = tag;
    op.data = data;
    op.size = size;
    op.status = Status();
    op.combine.reset();
    op.stamp = 0;
    return i;
  }
  std::size_t capacity() const { return ops_.size(); }
  Op& operator[](std::uint32_t i) { return ops_[i]; }
  const Op& operator[](std::uint32_t i) const { return ops_[i]; }

  algorithms::Link::Handle handle_of(std::uint32_t i) const {
    return (static_cast<algorithms::Link::Handle>(ops_[i].generation) << 32) |
           (static_cast<algorithms::Link::Handle>(i) + 1);
  }
  std::uint32_t index_of(algorithms::Link::Handle h) const {
    const auto low = static_cast<std::uint32_t>(h & 0xffffffffu);
    TRIB_CHECK(low >= 1 && low <= ops_.size()) << "unknown handle " << h;
    const std::uint32_t i = low - 1;
    TRIB_CHECK(ops_[i].in_use && !ops_[i].orphan && ops_[i].generation == (h >> 32))
        << "unknown or already waited handle " << h;
    return i;
  }
  // Frees the op and returns its status.
  Status release(std::uint32_t i) {
    Status st = std::move(ops_[i].status);
    free(i);
    return st;
  }
  void free(std::uint32_t i) {
    Op& op = ops_[i];
    op.in_use = false;
    op.owned.reset();
    ++op.generation;
    free_.push_back(i);
  }

  // The first receive in `posted` for `tag`, taken out of it; nullopt when none.
  std::optional<std::uint32_t> take_posted(std::vector<std::uint32_t>& posted,
                                           algorithms::Tag tag) const {
    auto it = std::find_if(posted.begin(), posted.end(),
                           [&](std::uint32_t i) { return ops_[i].tag == tag; });
    if (it == posted.end()) return std::nullopt;
    const std::uint32_t i = *it;
    posted.erase(it);
    return i;
  }

  // Send `i` to peer `p` is posted: it fails at once if the link was aborted or the peer
  // failed, else joins the peer's queue. True when it heads the queue (start writing).
  template <typename Peer>
  bool queue_send(std::uint32_t i, Peer& p, const AbortState& abort) {
    Op& op = ops_[i];
    if (abort.raised() || !p.failed.is_ok()) {
      op.finish(abort.raised() ? abort.status() : p.failed);
      return false;
    }
    p.sendq.push_back(i);
    return p.sendq.size() == 1;
  }

  // A peer's connection is gone: its posted receives and queued sends fail with `st`
  // (orphaned sends, whose waiter left already, are just freed).
  void fail_queued(std::vector<std::uint32_t>& posted, std::deque<std::uint32_t>& sendq,
                   const Status& st) {
    for (std::uint32_t i : posted) ops_[i].finish(st);
    posted.clear();
    for (std::uint32_t i : sendq) {
      if (ops_[i].orphan) {
        free(i);
      } else {
        ops_[i].finish(st);
      }
    }
    sendq.clear();
  }

  // The waiter of op `i` (on peer `p`) gives up at its deadline: a receive is unposted
  // (the rest of a message it was receiving is discarded: `discard`), a send abandoned.
  // `p` is a link's peer record with sendq, posted, state, direct_op and dst.
  template <typename Peer, typename State>
  Status time_out(std::uint32_t i, Peer& p, bool send_started, State receiving, State discard,
                  const std::string& peer) {
    Op& op = ops_[i];
    if (op.done) return release(i);
    Status st = timed_out(peer, op);
    if (op.is_send) {
      abandon_send(i, p.sendq, send_started);
      return st;
    }
    std::erase(p.posted, i);
    if (p.state == receiving && p.direct_op == i) {
      p.state = discard;
      p.dst = nullptr;
    }
    free(i);
    return st;
  }

  // The waiter of send `i` gives up. A send whose message is partly out (`started`,
  // it heads the queue) is finished from a private copy, or the stream would desync;
  // one still queued is dropped.
  void abandon_send(std::uint32_t i, std::deque<std::uint32_t>& sendq, bool started) {
    Op& op = ops_[i];
    auto it = std::find(sendq.begin(), sendq.end(), i);
    if (it == sendq.begin() && started) {
      op.owned.reset(new std::byte[op.size]);
      if (op.size > 0) std::memcpy(op.owned.get(), op.data, op.size);
      op.data = op.owned.get();
      op.orphan = true;
    } else if (it != sendq.end()) {
      sendq.erase(it);
      free(i);
    }
  }

 private:
  std::vector<Op> ops_;
  std::vector<std::uint32_t> free_;
};

// Whether a message of `length` bytes with `check` fits receive `op`: checked before
// match_status, so that the peer's name (a string built per call) is made only for an error.
inline bool fits(const PendingOp& op, std::uint64_t length, std::uint32_t check) {
  return length == op.size && check == op.tag.check;
}
// kMismatch unless a message of `length` bytes with `check` fits receive `op`.
Status match_status(const std::string& peer, const PendingOp& op, std::uint64_t length,
                    std::uint32_t check);
// The kTimedOut of a wait that gave up on `op` (send or receive) with `peer`.
Status timed_out(const std::string& peer, const PendingOp& op);

// Link::abort() of a stream link: records the reason (the first one wins), waits out any
// touch of a caller buffer in flight (io_mu), tells the peers through `notify` when the
// reason is an error (a deliberate kAborted is no news: they see the connection close),
// and shuts every peer's connection down.
template <typename Peers, typename Notify>
void abort_stream_link(AbortState& state, std::mutex& io_mu, Peers& peers, const Status& reason,
                       Notify notify) {
  const bool first = state.raise(reason);
  std::lock_guard io(io_mu);
  if (first && !reason.is_ok() && reason.code() != StatusCode::kAborted) notify(reason);
  for (auto& p : peers) {
    if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
  }
}

// Parameters every stream link takes.
struct StreamLinkParams {
  std::uint64_t epoch = 0;
  int rank = 0;
  int size = 1;
  std::uint64_t max_frame_bytes = 1ull << 30;
  // How long wait() polls without blocking before it sleeps in poll(2): trading a little
  // CPU for not paying a scheduler wake-up on every small message.
  Duration busy_poll = std::chrono::microseconds(50);
  // Link::combines(): receives may reduce as the bytes arrive (transport/receive_paths.h
  // says when that pays).
  bool combine = true;
  Logger log{"link"};  // dropped connections, stale or bad frames
};

// A non-blocking eventfd for AbortState, or kInternal.
Result<int> make_wake_fd();

// A stream link `L` over `peers` (each with an `fd` it takes over) and a fresh wake
// eventfd; when `ready` is an error, or the eventfd cannot be had, the peers' fds are
// closed and the error returned.
template <typename L, typename Params, typename Peers>
Result<std::unique_ptr<algorithms::Link>> make_stream_link(const Status& ready, Params params,
                                                           Peers peers) {
  Result<int> wake_fd = ready.is_ok() ? make_wake_fd() : Result<int>(ready);
  if (!wake_fd.is_ok()) {
    for (const auto& p : peers) ::close(p.fd);
    return wake_fd.status();
  }
  return std::unique_ptr<algorithms::Link>(
      std::make_unique<L>(std::move(params), std::move(peers), *wake_fd));
}

}  // namespace tributary::transport
