#include "agent/tcp_link.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>

#include "agent/frame.h"
#include "core/check.h"

namespace tributary::agent {
namespace {

constexpr std::size_t kStagingBytes = 64 * 1024;
// Payloads at least this large are read on their own: the header first (alone), then the
// payload straight into its destination. Smaller ones come with their header through
// staging, where one copy is cheaper than a second read(2).
constexpr std::size_t kDirectReadBytes = 16 * 1024;
constexpr int kMaxIov = 64;
constexpr std::size_t kMaxSpareBytes = 64u << 20;

std::string errno_text(int err) { return std::strerror(err); }

timespec to_timespec(Duration d) {
  const auto ns = std::max<Duration::rep>(0, d.count());
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

class TcpLink final : public algorithms::Link {
 public:
  TcpLink(TcpLinkParams params, std::vector<PeerSocket> sockets)
      : params_(std::move(params)), peers_(static_cast<std::size_t>(params_.size)) {
    TRIB_CHECK(params_.counters != nullptr);
    TRIB_CHECK(params_.rank >= 0 && params_.rank < params_.size);
    for (int r = 0; r < params_.size; ++r) {
      peers_[r].rank = r;
      peers_[r].counters = &params_.counters->peers[static_cast<std::size_t>(r)];
    }
    for (PeerSocket& s : sockets) {
      TRIB_CHECK(s.rank >= 0 && s.rank < params_.size && s.rank != params_.rank && s.fd >= 0)
          << "bad peer socket for rank " << s.rank;
      Peer& p = peers_[s.rank];
      TRIB_CHECK(p.fd < 0) << "two sockets for rank " << s.rank;
      p.fd = s.fd;
      p.address = std::move(s.address);
      p.staging.reset(new std::byte[kStagingBytes]);
    }
    for (const Peer& p : peers_) {
      TRIB_CHECK(p.rank == params_.rank || p.fd >= 0) << "no socket for rank " << p.rank;
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    TRIB_CHECK(wake_fd_ >= 0) << "eventfd: " << errno_text(errno);
  }

  ~TcpLink() override {
    for (Peer& p : peers_) {
      if (p.fd >= 0) ::close(p.fd);
    }
    ::close(wake_fd_);
  }

  int rank() const override { return params_.rank; }
  int size() const override { return params_.size; }

  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    check_peer(peer);
    const std::uint32_t i =
        alloc_op(true, peer, tag, const_cast<std::byte*>(data.data()), data.size());
    Op& op = ops_[i];
    op.header =
        encode_frame_header(FrameHeader{params_.epoch, tag.seq, tag.slot, tag.check, data.size()});
    std::lock_guard io(io_mu_);
    Peer& p = peers_[peer];
    if (aborted_.load(std::memory_order_acquire)) {
      finish(op, abort_status());
    } else if (!p.failed.is_ok()) {
      finish(op, p.failed);
    } else {
      p.sendq.push_back(i);
      if (p.sendq.size() == 1) flush(p);
    }
    return handle_of(i);
  }

  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    check_peer(peer);
    const std::uint32_t i = alloc_op(false, peer, tag, data.data(), data.size());
    Op& op = ops_[i];
    std::lock_guard io(io_mu_);
    Peer& p = peers_[peer];
    if (aborted_.load(std::memory_order_acquire)) {
      finish(op, abort_status());
      return handle_of(i);
    }
    auto u = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                          [&](const Unexpected& m) { return m.tag == tag; });
    if (u == p.unexpected.end()) {
      if (p.failed.is_ok()) {
        p.posted.push_back(i);
      } else {
        finish(op, p.failed);
      }
      return handle_of(i);
    }
    const bool in_flight = !u->complete;
    Status st = match_status(p, op, u->length, u->check);
    if (st.is_ok() && in_flight) {
      // The rest of this payload goes straight into the caller's buffer.
      const std::uint64_t have = u->length - p.remaining;
      if (have > 0) std::memcpy(op.data, u->bytes.get(), have);
      params_.counters->bytes_copied_unexpected.fetch_add(have, std::memory_order_relaxed);
      p.state = RecvState::kDirect;
      p.dst = op.data;
      p.direct_op = i;
    } else {
      if (st.is_ok() && u->length > 0) {
        std::memcpy(op.data, u->bytes.get(), u->length);
        params_.counters->bytes_copied_unexpected.fetch_add(u->length, std::memory_order_relaxed);
      }
      if (in_flight) {
        p.state = RecvState::kDiscard;
        p.dst = nullptr;
      }
      finish(op, std::move(st));
    }
    recycle(std::move(u->bytes));
    p.unexpected.erase(u);
    return handle_of(i);
  }

  Status wait(Handle handle, Deadline deadline) override {
    const std::uint32_t i = index_of(handle);
    bool spinning = true;
    const TimePoint spin_until = std::chrono::steady_clock::now() + params_.busy_poll;
    for (;;) {
      Op& op = ops_[i];
      if (op.done) return release(i);
      if (aborted_.load(std::memory_order_acquire)) {
        free_op(i);
        return abort_status();
      }
      const TimePoint now = std::chrono::steady_clock::now();
      if (deadline.passed(now)) return time_out(i);
      if (spinning && now >= spin_until) spinning = false;
      progress(spinning ? Duration::zero() : deadline.at - now, deadline);
    }
  }

  void abort(const Status& reason) override {
    bool first = false;
    {
      std::lock_guard lock(abort_mu_);
      if (!aborted_.load(std::memory_order_relaxed)) {
        abort_status_ = reason.is_ok() ? error(StatusCode::kAborted, "aborted") : reason;
        aborted_.store(true, std::memory_order_release);
        first = true;
      }
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    // Taking io_mu_ waits out any read or write into a caller buffer in flight; later
    // ones see aborted_ first.
    std::lock_guard io(io_mu_);
    // A deliberate abort (kAborted: leave, new view) is not news for the peers: they see
    // the connection close. An error is, and they should fail with it, not "peer lost".
    if (first && !reason.is_ok() && reason.code() != StatusCode::kAborted) notify_peers(reason);
    for (Peer& p : peers_) {
      if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
    }
  }

 private:
  enum class RecvState : std::uint8_t { kHeader, kDirect, kUnexpected, kDiscard, kAbortNotice };

  struct Op {
    std::uint32_t generation = 0;
    bool in_use = false;
    bool is_send = false;
    bool done = false;
    bool orphan = false;  // its wait() gave up; finish sending from `owned`, then free
    int peer = -1;
    algorithms::Tag tag;
    std::byte* data = nullptr;
    std::size_t size = 0;
    Status status;
    FrameHeaderBytes header{};
    std::unique_ptr<std::byte[]> owned;
  };

  // Early-arriving payloads land here; buffers are recycled because fresh ones cost a
  // page fault per 4 KiB on first touch, which dominated large pipelined collectives.
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
    std::byte* get() const { return data.get(); }
  };

  struct Unexpected {
    algorithms::Tag tag;
    std::uint32_t check = 0;
    std::uint64_t length = 0;
    Buffer bytes;
    bool complete = false;
  };

  struct Peer {
    int rank = -1;
    int fd = -1;
    std::string address;
    Status failed;
    LinkCounters::Peer* counters = nullptr;
    // Send side: ops in wire order; the head may be partly written.
    std::deque<std::uint32_t> sendq;
    std::size_t head_sent = 0;
    // Receive side.
    std::vector<std::uint32_t> posted;  // recvs in post order, none with a buffered match
    std::deque<Unexpected> unexpected;  // arrival order; back() may still be arriving
    RecvState state = RecvState::kHeader;
    std::byte* dst = nullptr;     // payload destination (nullptr: discard)
    std::uint64_t length = 0;     // current payload length
    std::uint64_t remaining = 0;  // of the current payload
    std::uint32_t direct_op = 0;
    std::unique_ptr<std::byte[]> staging;
    std::size_t stage_begin = 0;
    std::size_t stage_end = 0;
    bool logged_stale = false;
    std::vector<std::byte> notice;  // an abort notice's payload while it arrives
  };

  // An abort notice received from a peer, as this link reported it (`status`), kept so
  // that aborting with that very status relays the notice instead of wrapping it again.
  struct ReceivedNotice {
    Status status;
    AbortNotice notice;
  };

  // ---- operations ----

  void check_peer(int peer) const {
    TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "bad peer " << peer;
  }

  std::uint32_t alloc_op(bool is_send, int peer, algorithms::Tag tag, std::byte* data,
                         std::size_t size) {
    std::uint32_t i;
    if (!free_ops_.empty()) {
      i = free_ops_.back();
      free_ops_.pop_back();
    } else {
      i = static_cast<std::uint32_t>(ops_.size());
      ops_.emplace_back();
    }
    Op& op = ops_[i];
    op.in_use = true;
    op.is_send = is_send;
    op.done = false;
    op.orphan = false;
    op.peer = peer;
    op.tag = tag;
    op.data = data;
    op.size = size;
    op.status = Status();
    return i;
  }

  Handle handle_of(std::uint32_t i) const {
    return (static_cast<Handle>(ops_[i].generation) << 32) | (static_cast<Handle>(i) + 1);
  }

  std::uint32_t index_of(Handle h) const {
    const auto low = static_cast<std::uint32_t>(h & 0xffffffffu);
    TRIB_CHECK(low >= 1 && low <= ops_.size()) << "unknown handle " << h;
    const std::uint32_t i = low - 1;
    TRIB_CHECK(ops_[i].in_use && !ops_[i].orphan && ops_[i].generation == (h >> 32))
        << "unknown or already waited handle " << h;
    return i;
  }

  Status release(std::uint32_t i) {
    Op& op = ops_[i];
    Status st = std::move(op.status);
    free_op(i);
    return st;
  }

  void free_op(std::uint32_t i) {
    Op& op = ops_[i];
    op.in_use = false;
    op.owned.reset();
    ++op.generation;
    free_ops_.push_back(i);
  }

  void finish(Op& op, Status st) {
    op.done = true;
    op.status = std::move(st);
  }

  Status abort_status() {
    std::lock_guard lock(abort_mu_);
    return abort_status_;
  }

  std::string peer_name(const Peer& p) const {
    return "rank " + std::to_string(p.rank) + " at " + p.address;
  }

  Status match_status(const Peer& p, const Op& op, std::uint64_t length,
                      std::uint32_t check) const {
    if (length == op.size && check == op.tag.check) return Status();
    return error(StatusCode::kMismatch,
                 "rank " + std::to_string(p.rank) + " sent " + std::to_string(length) +
                     " bytes (check " + std::to_string(check) + ") for seq " +
                     std::to_string(op.tag.seq) + " slot " + std::to_string(op.tag.slot) +
                     ", expected " + std::to_string(op.size) + " (check " +
                     std::to_string(op.tag.check) + ")");
  }

  // The caller's wait ran out: detach the op so its buffer is never touched again.
  Status time_out(std::uint32_t i) {
    std::lock_guard io(io_mu_);
    Op& op = ops_[i];
    Peer& p = peers_[op.peer];
    if (op.done) return release(i);
    if (op.is_send) {
      auto it = std::find(p.sendq.begin(), p.sendq.end(), i);
      if (it == p.sendq.begin() && p.head_sent > 0) {
        // Half on the wire: finish from a private copy or the stream would desync.
        op.owned.reset(new std::byte[op.size]);
        if (op.size > 0) std::memcpy(op.owned.get(), op.data, op.size);
        op.data = op.owned.get();
        op.orphan = true;
      } else if (it != p.sendq.end()) {
        p.sendq.erase(it);
        free_op(i);
      }
      return error(
          StatusCode::kTimedOut,
          peer_name(p) + " did not take " + std::to_string(op.size) + " bytes before the deadline");
    }
    std::erase(p.posted, i);
    if (p.state == RecvState::kDirect && p.direct_op == i) {
      p.state = RecvState::kDiscard;
      p.dst = nullptr;
    }
    const algorithms::Tag tag = op.tag;
    free_op(i);
    return error(StatusCode::kTimedOut, "no message from " + peer_name(p) + " for seq " +
                                            std::to_string(tag.seq) + " slot " +
                                            std::to_string(tag.slot) + " before the deadline");
  }

  // ---- the progress engine (caller's thread) ----

  // Polls every live socket for up to `timeout` and services what is ready.
  void progress(Duration timeout, Deadline deadline) {
    pollfds_.clear();
    poll_peers_.clear();
    pollfds_.push_back(pollfd{wake_fd_, POLLIN, 0});
    for (Peer& p : peers_) {
      if (p.fd < 0) continue;
      const short events = static_cast<short>(POLLIN | (p.sendq.empty() ? 0 : POLLOUT));
      pollfds_.push_back(pollfd{p.fd, events, 0});
      poll_peers_.push_back(&p);
    }
    int n;
    if (timeout == Duration::zero()) {
      n = ::poll(pollfds_.data(), pollfds_.size(), 0);
      // When ranks outnumber cores the peer we wait for may need this very core.
      if (n == 0) sched_yield();
    } else if (deadline.at == TimePoint::max()) {
      n = ::ppoll(pollfds_.data(), pollfds_.size(), nullptr, nullptr);
    } else {
      const timespec ts = to_timespec(timeout);
      n = ::ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr);
    }
    if (n <= 0) return;  // timeout or EINTR: the caller re-checks its op and deadline
    std::lock_guard io(io_mu_);
    if (aborted_.load(std::memory_order_acquire)) return;
    for (std::size_t k = 0; k < poll_peers_.size(); ++k) {
      const short re = pollfds_[k + 1].revents;
      Peer& p = *poll_peers_[k];
      if (re == 0 || p.fd < 0) continue;
      if (re & (POLLIN | POLLERR | POLLHUP)) pump_read(p);
      if (p.fd >= 0 && (re & POLLOUT) && !p.sendq.empty()) flush(p);
    }
  }

  void flush(Peer& p) {
    while (!p.sendq.empty()) {
      iovec iov[kMaxIov];
      int cnt = 0;
      std::size_t skip = p.head_sent;
      for (auto it = p.sendq.begin(); it != p.sendq.end() && cnt + 2 <= kMaxIov; ++it) {
        Op& op = ops_[*it];
        if (skip < kFrameHeaderBytes) {
          iov[cnt++] = iovec{op.header.data() + skip, kFrameHeaderBytes - skip};
          skip = 0;
        } else {
          skip -= kFrameHeaderBytes;
        }
        if (op.size > skip) iov[cnt++] = iovec{op.data + skip, op.size - skip};
        skip = 0;
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(cnt);
      const ssize_t n = ::sendmsg(p.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        fail_peer(p,
                  error(StatusCode::kPeerLost,
                        "connection to " + peer_name(p) + " failed: " + errno_text(errno)),
                  false);
        return;
      }
      p.counters->bytes_sent.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      std::size_t left = static_cast<std::size_t>(n);
      std::size_t requested = 0;
      for (int k = 0; k < cnt; ++k) requested += iov[k].iov_len;
      while (left > 0) {
        const std::uint32_t i = p.sendq.front();
        Op& op = ops_[i];
        const std::size_t rest = kFrameHeaderBytes + op.size - p.head_sent;
        if (left < rest) {
          p.head_sent += left;
          break;
        }
        left -= rest;
        p.head_sent = 0;
        p.sendq.pop_front();
        p.counters->frames_sent.fetch_add(1, std::memory_order_relaxed);
        if (op.orphan) {
          free_op(i);
        } else {
          finish(op, Status());
        }
      }
      if (static_cast<std::size_t>(n) < requested) return;  // the socket buffer is full
    }
  }

  void pump_read(Peer& p) {
    for (;;) {
      consume_staging(p);
      if (p.fd < 0) return;
      // consume_staging leaves staging empty in payload states, < one header otherwise.
      iovec iov[2];
      int cnt = 0;
      std::size_t direct = 0;
      if (p.state == RecvState::kHeader) {
        if (p.stage_begin > 0) {
          const std::size_t avail = p.stage_end - p.stage_begin;
          std::memmove(p.staging.get(), p.staging.get() + p.stage_begin, avail);
          p.stage_begin = 0;
          p.stage_end = avail;
        }
        // After a large payload the next one is probably large too: read just its header
        // so that the payload lands in its destination without a pass through staging.
        const std::size_t want = p.length >= kDirectReadBytes ? kFrameHeaderBytes - p.stage_end
                                                              : kStagingBytes - p.stage_end;
        iov[cnt++] = iovec{p.staging.get() + p.stage_end, want};
      } else {
        p.stage_begin = p.stage_end = 0;
        std::size_t overflow = kStagingBytes;
        if (p.dst != nullptr) {
          direct = static_cast<std::size_t>(p.remaining);
          iov[cnt++] = iovec{p.dst + (p.length - p.remaining), direct};
          // Behind a large payload take only the next header, so the payload after it
          // can go straight to its destination too instead of through staging.
          if (p.length >= kDirectReadBytes) overflow = kFrameHeaderBytes;
        }
        iov[cnt++] = iovec{p.staging.get(), overflow};
      }
      std::size_t requested = 0;
      for (int k = 0; k < cnt; ++k) requested += iov[k].iov_len;
      const ssize_t n = ::readv(p.fd, iov, cnt);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        fail_peer(p,
                  error(StatusCode::kPeerLost,
                        "connection to " + peer_name(p) + " failed: " + errno_text(errno)),
                  false);
        return;
      }
      if (n == 0) {
        fail_peer(p, error(StatusCode::kPeerLost, peer_name(p) + " closed the connection"), false);
        return;
      }
      p.counters->bytes_received.fetch_add(static_cast<std::uint64_t>(n),
                                           std::memory_order_relaxed);
      std::size_t got = static_cast<std::size_t>(n);
      if (p.state == RecvState::kHeader) {
        p.stage_end += got;
      } else {
        const std::size_t to_dst = std::min(got, direct);
        p.remaining -= to_dst;
        p.stage_end = got - to_dst;
        if (p.remaining == 0) end_payload(p);
      }
      if (got < requested) {
        consume_staging(p);
        return;  // drained; poll tells us when there is more
      }
    }
  }

  // Parses headers and moves payload bytes out of the staging buffer.
  void consume_staging(Peer& p) {
    while (p.fd >= 0) {
      const std::size_t avail = p.stage_end - p.stage_begin;
      if (p.state == RecvState::kHeader) {
        if (avail < kFrameHeaderBytes) return;
        std::span<const std::byte, kFrameHeaderBytes> hb(p.staging.get() + p.stage_begin,
                                                         kFrameHeaderBytes);
        p.stage_begin += kFrameHeaderBytes;
        Result<FrameHeader> h = decode_frame_header(hb, params_.max_frame_bytes);
        if (!h.is_ok()) {
          params_.counters->bad_frames.fetch_add(1, std::memory_order_relaxed);
          fail_peer(p,
                    error(StatusCode::kBadFrame,
                          "bad frame from " + peer_name(p) + ": " + h.status().message()),
                    true);
          return;
        }
        begin_payload(p, *h);
        continue;
      }
      if (avail == 0) return;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(avail, p.remaining));
      if (p.dst != nullptr)
        std::memcpy(p.dst + (p.length - p.remaining), p.staging.get() + p.stage_begin, n);
      p.stage_begin += n;
      p.remaining -= n;
      if (p.remaining == 0) end_payload(p);
    }
  }

  void begin_payload(Peer& p, const FrameHeader& h) {
    p.counters->frames_received.fetch_add(1, std::memory_order_relaxed);
    p.length = p.remaining = h.length;
    p.dst = nullptr;
    if (h.epoch != params_.epoch) {
      params_.counters->frames_dropped_stale_epoch.fetch_add(1, std::memory_order_relaxed);
      if (!p.logged_stale) {
        p.logged_stale = true;
        log("dropping frames of epoch " + std::to_string(h.epoch) + " from " + peer_name(p) +
            " (this link is epoch " + std::to_string(params_.epoch) + ")");
      }
      p.state = RecvState::kDiscard;
    } else if (h.kind == FrameKind::kAbort) {
      p.notice.resize(h.length);  // decode_frame_header bounded it
      p.state = RecvState::kAbortNotice;
      p.dst = p.notice.data();
    } else {
      const algorithms::Tag tag{h.seq, h.slot, h.check};
      auto it = std::find_if(p.posted.begin(), p.posted.end(),
                             [&](std::uint32_t i) { return ops_[i].tag == tag; });
      if (it != p.posted.end()) {
        const std::uint32_t i = *it;
        p.posted.erase(it);
        Op& op = ops_[i];
        Status st = match_status(p, op, h.length, h.check);
        if (st.is_ok()) {
          p.state = RecvState::kDirect;
          p.dst = op.data;
          p.direct_op = i;
        } else {
          finish(op, std::move(st));
          p.state = RecvState::kDiscard;
        }
      } else {
        Unexpected& u = p.unexpected.emplace_back();
        u.tag = tag;
        u.check = h.check;
        u.length = h.length;
        u.bytes = take_buffer(h.length);
        p.state = RecvState::kUnexpected;
        p.dst = u.bytes.get();
      }
    }
    if (p.remaining == 0) end_payload(p);
  }

  void end_payload(Peer& p) {
    const RecvState state = p.state;
    p.state = RecvState::kHeader;
    p.dst = nullptr;
    if (state == RecvState::kDirect) {
      finish(ops_[p.direct_op], Status());
    } else if (state == RecvState::kUnexpected) {
      p.unexpected.back().complete = true;
    } else if (state == RecvState::kAbortNotice) {
      Result<AbortNotice> n = decode_abort_payload(p.notice);
      if (!n.is_ok()) {
        params_.counters->bad_frames.fetch_add(1, std::memory_order_relaxed);
        fail_peer(p,
                  error(StatusCode::kBadFrame,
                        "bad abort notice from " + peer_name(p) + ": " + n.status().message()),
                  true);
        return;
      }
      Status st(n->code, "rank " + std::to_string(n->origin) + " aborted: " + n->message);
      received_notices_.push_back({st, std::move(*n)});
      fail_peer(p, std::move(st), false);
    }
  }

  // Best effort, never blocking: tells every connected peer why this link gives up, so
  // their pending operations fail with the same code and reason. A peer whose stream is
  // in the middle of a frame gets the notice only if that frame can be finished at once.
  void notify_peers(const Status& reason) {
    AbortNotice notice{reason.code(), static_cast<std::uint32_t>(params_.rank), reason.message()};
    for (const ReceivedNotice& r : received_notices_) {
      if (r.status.code() == reason.code() && r.status.message() == reason.message()) {
        notice = r.notice;  // relay the origin's own words
        break;
      }
    }
    const std::vector<std::byte> frame = encode_abort_frame(params_.epoch, notice);
    for (Peer& p : peers_) {
      if (p.fd < 0 || !p.failed.is_ok()) continue;
      if (p.head_sent > 0 && !finish_head_frame(p)) continue;
      [[maybe_unused]] ssize_t n =
          ::send(p.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }

  // One non-blocking attempt to write the rest of a half-sent frame.
  bool finish_head_frame(Peer& p) {
    const Op& op = ops_[p.sendq.front()];
    iovec iov[2];
    int cnt = 0;
    std::size_t skip = p.head_sent;
    if (skip < kFrameHeaderBytes) {
      iov[cnt++] = iovec{const_cast<std::byte*>(op.header.data()) + skip, kFrameHeaderBytes - skip};
      skip = 0;
    } else {
      skip -= kFrameHeaderBytes;
    }
    if (op.size > skip) iov[cnt++] = iovec{op.data + skip, op.size - skip};
    std::size_t want = 0;
    for (int k = 0; k < cnt; ++k) want += iov[k].iov_len;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(cnt);
    const ssize_t n = ::sendmsg(p.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n >= 0 && static_cast<std::size_t>(n) == want;
  }

  // Closes the connection and fails everything pending on it. Messages that arrived
  // whole before the failure stay deliverable. A connection closed while nothing was
  // pending on it (a peer leaving at the end of a run) is not worth a log line; later
  // operations on it still fail with `st`.
  void fail_peer(Peer& p, Status st, bool always_log) {
    const bool pending = !p.posted.empty() || !p.sendq.empty() || p.state == RecvState::kDirect;
    if (always_log || (pending && !aborted_.load(std::memory_order_relaxed))) {
      log("dropping connection to " + peer_name(p) + ": " + st.message());
    }
    p.failed = st;
    ::close(p.fd);
    p.fd = -1;
    if (p.state == RecvState::kDirect) finish(ops_[p.direct_op], st);
    if (p.state == RecvState::kUnexpected) {
      recycle(std::move(p.unexpected.back().bytes));
      p.unexpected.pop_back();
    }
    p.state = RecvState::kHeader;
    p.dst = nullptr;
    for (std::uint32_t i : p.posted) finish(ops_[i], st);
    p.posted.clear();
    for (std::uint32_t i : p.sendq) {
      if (ops_[i].orphan) {
        free_op(i);
      } else {
        finish(ops_[i], st);
      }
    }
    p.sendq.clear();
    p.head_sent = 0;
  }

  Buffer take_buffer(std::size_t length) {
    auto best = spare_.end();
    for (auto it = spare_.begin(); it != spare_.end(); ++it) {
      if (it->capacity >= length && (best == spare_.end() || it->capacity < best->capacity))
        best = it;
    }
    if (best == spare_.end()) {
      return Buffer{std::make_unique_for_overwrite<std::byte[]>(length), length};
    }
    Buffer b = std::move(*best);
    spare_.erase(best);
    spare_bytes_ -= b.capacity;
    return b;
  }

  void recycle(Buffer b) {
    if (b.capacity == 0 || b.capacity > kMaxSpareBytes) return;
    while (!spare_.empty() && spare_bytes_ + b.capacity > kMaxSpareBytes) {
      spare_bytes_ -= spare_.front().capacity;
      spare_.erase(spare_.begin());
    }
    spare_bytes_ += b.capacity;
    spare_.push_back(std::move(b));
  }

  void log(const std::string& line) const {
    if (params_.log) params_.log(line);
  }

  TcpLinkParams params_;
  std::vector<Peer> peers_;  // by rank; peers_[rank()] unused
  int wake_fd_ = -1;

  // Owner thread only (guarded additionally by io_mu_ where abort() can race).
  std::vector<Op> ops_;
  std::vector<std::uint32_t> free_ops_;
  std::vector<Buffer> spare_;  // oldest first
  std::vector<ReceivedNotice> received_notices_;
  std::size_t spare_bytes_ = 0;
  std::vector<pollfd> pollfds_;
  std::vector<Peer*> poll_peers_;

  // Held around every touch of a socket or caller buffer, so abort() can wait them out.
  std::mutex io_mu_;
  std::mutex abort_mu_;
  std::atomic<bool> aborted_{false};
  Status abort_status_;  // guarded by abort_mu_
};

}  // namespace

std::unique_ptr<algorithms::Link> make_tcp_link(TcpLinkParams params,
                                                std::vector<PeerSocket> peers) {
  return std::make_unique<TcpLink>(std::move(params), std::move(peers));
}

}  // namespace tributary::agent
