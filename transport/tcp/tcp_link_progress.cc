// The TcpLink's progress engine: polls the sockets from the thread that waits, reads
// frames into posted buffers (or buffers them as unexpected), flushes queued sends, and
// turns socket failures, bad frames and abort notices into per-peer errors.
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/tcp/tcp_link_impl.h"
#include "transport/tcp/tls_stream.h"
#include "core/crc32c.h"

namespace tributary::transport {
namespace {

// Payloads at least this large are read on their own: the header first (alone), then the
// payload straight into its destination. Smaller ones come with their header through
// staging, where one copy is cheaper than a second read(2).
constexpr std::size_t kDirectReadBytes = 16 * 1024;
constexpr int kMaxIov = 64;

timespec to_timespec(Duration d) {
  const auto ns = std::max<Duration::rep>(0, d.count());
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

}  // namespace

bool TcpLink::progress(Duration timeout, Deadline deadline, bool yield_when_idle) {
  pollfds_.clear();
  poll_peers_.clear();
  pollfds_.push_back(pollfd{abort_.wake_fd(), POLLIN, 0});
  for (Peer& p : peers_) {
    if (p.fd < 0 || (p.stalled && p.sendq.empty())) continue;
    const short events =
        static_cast<short>((p.stalled ? 0 : POLLIN) | (p.sendq.empty() ? 0 : POLLOUT));
    pollfds_.push_back(pollfd{p.fd, events, 0});
    poll_peers_.push_back(&p);
  }
  // Records OpenSSL has read ahead are invisible to poll(2): with some, only look.
  bool tls_pending = false;
  if (any_tls_) {
    for (const Peer* p : poll_peers_) {
      if (p->tls && !p->stalled && p->tls->has_pending()) tls_pending = true;
    }
    if (tls_pending) timeout = Duration::zero();
  }
  int n;
  if (tls_pending) {
    n = ::poll(pollfds_.data(), pollfds_.size(), 0);
  } else if (timeout == Duration::zero()) {
    n = ::poll(pollfds_.data(), pollfds_.size(), 0);
    // When ranks outnumber cores the peer we wait for may need this very core.
    if (n == 0 && yield_when_idle) sched_yield();
  } else if (deadline.at == TimePoint::max()) {
    n = ::ppoll(pollfds_.data(), pollfds_.size(), nullptr, nullptr);
  } else {
    const timespec ts = to_timespec(timeout);
    n = ::ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr);
  }
  // Timeout or EINTR: the caller re-checks its op and deadline.
  if (n < 0 || (n == 0 && !tls_pending)) return false;
  std::lock_guard io(io_mu_);
  if (abort_.raised()) return true;
  for (std::size_t k = 0; k < poll_peers_.size(); ++k) {
    short re = pollfds_[k + 1].revents;
    Peer& p = *poll_peers_[k];
    if (tls_pending && p.tls && p.fd >= 0 && !p.stalled && p.tls->has_pending()) re |= POLLIN;
    if (re == 0 || p.fd < 0) continue;
    if (re & (POLLIN | POLLERR | POLLHUP)) pump_read(p);
    if (p.fd >= 0 && (re & POLLOUT) && !p.sendq.empty()) flush(p);
  }
  return true;
}

void TcpLink::flush(Peer& p) {
  if (p.tls) return flush_tls(p);
  while (!p.sendq.empty()) {
    iovec iov[kMaxIov];
    int cnt = 0;
    std::size_t skip = p.head_sent;
    for (auto it = p.sendq.begin(); it != p.sendq.end() && cnt + 3 <= kMaxIov; ++it) {
      if (!frame_iov(ops_[*it], skip, iov, cnt)) break;
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(cnt);
    const ssize_t n = ::sendmsg(p.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail_peer_os(p, errno);
      return;
    }
    std::size_t requested = 0;
    for (int k = 0; k < cnt; ++k) requested += iov[k].iov_len;
    account_sent(p, static_cast<std::size_t>(n));
    if (static_cast<std::size_t>(n) < requested) return;  // the socket buffer is full
  }
}

void TcpLink::account_sent(Peer& p, std::size_t n) {
  p.counters->bytes_sent.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  std::size_t left = n;
  while (left > 0) {
    const std::uint32_t i = p.sendq.front();
    Op& op = ops_[i];
    const std::size_t rest = frame_bytes(op) - p.head_sent;
    if (!op.trailer_ready) {
      // The payload bytes among those just written: checksummed while they are in cache.
      const std::size_t from = std::max(p.head_sent, kFrameHeaderBytes) - kFrameHeaderBytes;
      const std::size_t to =
          std::min(p.head_sent + std::min(left, rest), kFrameHeaderBytes + op.size) -
          kFrameHeaderBytes;
      if (to > from) op.crc = crc32c({op.data + from, to - from}, op.crc);
      if (to == op.size) {
        op.trailer = encode_frame_trailer(op.crc);
        op.trailer_ready = true;
      }
    }
    if (left < rest) {
      p.head_sent += left;
      break;
    }
    left -= rest;
    p.head_sent = 0;
    p.sendq.pop_front();
    p.counters->frames_sent.fetch_add(1, std::memory_order_relaxed);
    if (op.orphan) {
      ops_.free(i);
    } else {
      op.finish(Status());
    }
  }
}

bool TcpLink::frame_iov(Op& op, std::size_t skip, iovec* iov, int& cnt) {
  if (skip < kFrameHeaderBytes) {
    iov[cnt++] = iovec{op.header.data() + skip, kFrameHeaderBytes - skip};
    skip = 0;
  } else {
    skip -= kFrameHeaderBytes;
  }
  if (op.size == 0) return true;
  if (skip < op.size) {
    iov[cnt++] = iovec{op.data + skip, op.size - skip};
    skip = 0;
  } else {
    skip -= op.size;
  }
  if (!op.trailer_ready) return false;
  iov[cnt++] = iovec{op.trailer.data() + skip, kFrameTrailerBytes - skip};
  return true;
}

void TcpLink::finish_crc(Op& op, std::size_t from) {
  if (op.trailer_ready) return;
  if (from < op.size) op.crc = crc32c({op.data + from, op.size - from}, op.crc);
  op.trailer = encode_frame_trailer(op.crc);
  op.trailer_ready = true;
}

std::span<const std::byte> TcpLink::tls_segment(Peer& p, std::size_t sent) {
  Op& op = ops_[p.sendq.front()];
  const std::size_t frame = frame_bytes(op);
  if (frame <= kTlsCoalesceBytes && op.trailer_ready) {
    // Rebuilt on every attempt from the same bytes, so a retry offers what it offered.
    std::byte* scratch = p.tls_scratch.get();
    std::memcpy(scratch, op.header.data(), kFrameHeaderBytes);
    if (op.size > 0) {
      std::memcpy(scratch + kFrameHeaderBytes, op.data, op.size);
      std::memcpy(scratch + kFrameHeaderBytes + op.size, op.trailer.data(), kFrameTrailerBytes);
    }
    return {scratch + sent, frame - sent};
  }
  if (sent < kFrameHeaderBytes) return {op.header.data() + sent, kFrameHeaderBytes - sent};
  const std::size_t off = sent - kFrameHeaderBytes;
  if (off < op.size) return {op.data + off, op.size - off};
  // The payload is out, so account_sent has finished its CRC.
  TRIB_CHECK(op.trailer_ready) << "trailer of a frame not yet known";
  return {op.trailer.data() + (off - op.size), kFrameTrailerBytes - (off - op.size)};
}

void TcpLink::flush_tls(Peer& p) {
  while (!p.sendq.empty()) {
    const std::span<const std::byte> seg = tls_segment(p, p.head_sent);
    std::size_t put = 0;
    const TlsIo r = p.tls->write(seg.data(), seg.size(), &put);
    if (r == TlsIo::kWantWrite || r == TlsIo::kWantRead) {
      p.tls_write_pending = true;
      return;
    }
    if (r != TlsIo::kOk) {
      fail_peer(p,
                error(StatusCode::kPeerLost,
                      "connection to " + peer_name(p) + " failed: " + p.tls->error()),
                r == TlsIo::kError);
      return;
    }
    p.tls_write_pending = false;
    account_sent(p, put);
  }
}

ssize_t TcpLink::read_some(Peer& p, const iovec* iov, int cnt, bool* drained) {
  if (!p.tls) {
    const ssize_t n = ::readv(p.fd, iov, cnt);
    std::size_t requested = 0;
    for (int k = 0; k < cnt; ++k) requested += iov[k].iov_len;
    *drained = n >= 0 && static_cast<std::size_t>(n) < requested;
    return n;
  }
  *drained = false;
  std::size_t total = 0;
  for (int k = 0; k < cnt; ++k) {
    auto* base = static_cast<std::byte*>(iov[k].iov_base);
    std::size_t off = 0;
    while (off < iov[k].iov_len) {
      std::size_t got = 0;
      const TlsIo r = p.tls->read(base + off, iov[k].iov_len - off, &got);
      if (r == TlsIo::kOk) {
        off += got;
        continue;
      }
      total += off;
      // kClosed and kError are sticky: with bytes in hand they come back on the next call.
      if (total > 0) {
        *drained = r == TlsIo::kWantRead || r == TlsIo::kWantWrite;
        return static_cast<ssize_t>(total);
      }
      if (r == TlsIo::kClosed) return 0;
      if (r == TlsIo::kError) return -2;
      errno = EAGAIN;
      return -1;
    }
    total += off;
  }
  return static_cast<ssize_t>(total);
}

void TcpLink::pump_read(Peer& p) {
  for (;;) {
    consume_staging(p);
    if (p.fd < 0 || p.stalled) return;
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
      // A combining receive's payload comes through staging (consume_staging reduces it
      // from there); any other goes straight to its destination.
      if (p.dst != nullptr && !combining(p)) {
        direct = static_cast<std::size_t>(p.remaining);
        if (direct > 0) iov[cnt++] = iovec{p.dst + (p.length - p.remaining), direct};
        // Behind a large payload take only its trailer and the next header, so the
        // payload after it can go straight to its destination too instead of through
        // staging.
        if (p.length >= kDirectReadBytes) overflow = p.trailer_left + kFrameHeaderBytes;
      }
      iov[cnt++] = iovec{p.staging.get(), overflow};
    }
    bool drained = false;
    const ssize_t n = read_some(p, iov, cnt, &drained);
    if (n == -2) {
      params_.counters->bad_frames.fetch_add(1, std::memory_order_relaxed);
      fail_peer(p,
                error(StatusCode::kBadFrame,
                      "TLS on the connection to " + peer_name(p) + " failed: " + p.tls->error()),
                true);
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail_peer_os(p, errno);
      return;
    }
    if (n == 0) {
      fail_peer(p, error(StatusCode::kPeerLost, peer_name(p) + " closed the connection"), false);
      return;
    }
    p.counters->bytes_received.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    std::size_t got = static_cast<std::size_t>(n);
    if (p.state == RecvState::kHeader) {
      p.stage_end += got;
    } else {
      const std::size_t to_dst = std::min(got, direct);
      if (to_dst > 0) p.crc = crc32c({p.dst + (p.length - p.remaining), to_dst}, p.crc);
      p.remaining -= to_dst;
      p.stage_end = got - to_dst;  // the trailer and what follows: consume_staging's
    }
    if (drained) {
      consume_staging(p);
      return;  // poll tells us when there is more
    }
  }
}

void TcpLink::consume_staging(Peer& p) {
  while (p.fd >= 0 && !p.stalled) {
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
      if (!begin_payload(p, *h)) {
        p.stage_begin -= kFrameHeaderBytes;  // read again when the peer resumes
        return;
      }
      continue;
    }
    if (p.remaining == 0) {
      // The payload is in: its trailer.
      const std::size_t n = std::min(avail, p.trailer_left);
      std::memcpy(p.trailer.data() + (kFrameTrailerBytes - p.trailer_left),
                  p.staging.get() + p.stage_begin, n);
      p.stage_begin += n;
      p.trailer_left -= n;
      if (p.trailer_left > 0) return;
      end_payload(p);
      continue;
    }
    if (avail == 0) return;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(avail, p.remaining));
    if (p.dst != nullptr) {
      const std::byte* src = p.staging.get() + p.stage_begin;
      p.crc = crc32c({src, n}, p.crc);
      if (combining(p)) {
        p.combining.feed(src, n);
      } else {
        std::memcpy(p.dst + (p.length - p.remaining), src, n);
      }
    }
    p.stage_begin += n;
    p.remaining -= n;
  }
}

bool TcpLink::begin_payload(Peer& p, const FrameHeader& h) {
  const algorithms::Tag tag{h.seq, h.slot, h.check};
  const auto posted = std::find_if(p.posted.begin(), p.posted.end(),
                                   [&](std::uint32_t i) { return ops_[i].tag == tag; });
  if (h.epoch == params_.epoch && h.kind == FrameKind::kData && posted == p.posted.end() &&
      p.unexpected_bytes + h.length > params_.max_unexpected_bytes) {
    p.stalled = true;
    params_.counters->unexpected_stalls.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  p.counters->frames_received.fetch_add(1, std::memory_order_relaxed);
  p.frame = h;
  p.crc = 0;
  p.length = p.remaining = h.length;
  p.trailer_left = frame_body_bytes(h.length) - h.length;
  p.dst = nullptr;
  if (h.epoch != params_.epoch) {
    params_.counters->frames_dropped_stale_epoch.fetch_add(1, std::memory_order_relaxed);
    if (!p.logged_stale) {
      p.logged_stale = true;
      params_.log.warn("dropping frames of epoch " + std::to_string(h.epoch) + " from " +
                       peer_name(p) + " (this link is epoch " + std::to_string(params_.epoch) +
                       ")");
    }
    p.state = RecvState::kDiscard;
  } else if (h.kind == FrameKind::kAbort) {
    p.notice.resize(h.length);  // decode_frame_header bounded it
    p.state = RecvState::kAbortNotice;
    p.dst = p.notice.data();
  } else {
    if (posted != p.posted.end()) {
      const std::uint32_t i = *posted;
      p.posted.erase(posted);
      Op& op = ops_[i];
      op.stamp = h.stamp;
      Status st = transport::fits(op, h.length, h.check)
                      ? Status()
                      : transport::match_status(peer_name(p), op, h.length, h.check);
      if (st.is_ok()) {
        p.state = RecvState::kDirect;
        p.dst = op.data;
        p.direct_op = i;
        if (op.combine) p.combining.start(*op.combine, op.data);
      } else {
        op.finish(std::move(st));
        p.state = RecvState::kDiscard;
      }
    } else {
      transport::EarlyMessage& u = p.unexpected.emplace_back();
      u.tag = tag;
      u.length = h.length;
      u.stamp = h.stamp;
      u.bytes = pool_.take(h.length);
      p.unexpected_bytes += h.length;
      p.state = RecvState::kUnexpected;
      p.dst = u.bytes.get();
    }
  }
  if (h.length == 0) end_payload(p);
  return true;
}

void TcpLink::end_payload(Peer& p) {
  const RecvState state = p.state;
  p.state = RecvState::kHeader;
  p.dst = nullptr;
  if (state == RecvState::kDiscard) return;
  if (p.frame.length > 0 && p.crc != decode_frame_trailer(p.trailer)) {
    return fail_corrupt(p, state);
  }
  if (state == RecvState::kDirect) {
    ops_[p.direct_op].finish(Status());
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

void TcpLink::fail_corrupt(Peer& p, RecvState state) {
  params_.counters->bad_frames.fetch_add(1, std::memory_order_relaxed);
  params_.counters->crc_failures.fetch_add(1, std::memory_order_relaxed);
  Status st =
      error(StatusCode::kBadFrame,
            "frame from " + peer_name(p) + " to rank " + std::to_string(params_.rank) + " (seq " +
                std::to_string(p.frame.seq) + " slot " + std::to_string(p.frame.slot) + ", " +
                std::to_string(p.frame.length) + " bytes) fails its CRC-32C check (computed " +
                std::to_string(p.crc) + ", sent " + std::to_string(decode_frame_trailer(p.trailer)) +
                "): corrupted in transit, not delivered");
  if (state == RecvState::kDirect) ops_[p.direct_op].finish(st);
  if (state == RecvState::kUnexpected) {
    p.unexpected_bytes -= p.unexpected.back().length;
    pool_.give_back(std::move(p.unexpected.back().bytes));
    p.unexpected.pop_back();
  }
  fail_peer(p, std::move(st), true);
}

void TcpLink::resume(Peer& p) {
  if (!p.stalled) return;
  p.stalled = false;
  consume_staging(p);
}

void TcpLink::notify_peers(const Status& reason) {
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
    if ((p.head_sent > 0 || p.tls_write_pending) && !finish_head_frame(p)) continue;
    if (p.tls) {
      std::size_t put = 0;
      for (std::size_t off = 0; off < frame.size(); off += put) {
        if (p.tls->write(frame.data() + off, frame.size() - off, &put) != TlsIo::kOk) break;
      }
      continue;
    }
    [[maybe_unused]] ssize_t n =
        ::send(p.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

bool TcpLink::finish_head_frame(Peer& p) {
  Op& head = ops_[p.sendq.front()];
  finish_crc(head, std::max(p.head_sent, kFrameHeaderBytes) - kFrameHeaderBytes);
  if (p.tls) {
    const Op& op = head;
    const std::size_t frame = frame_bytes(op);
    for (std::size_t sent = p.head_sent; sent < frame;) {
      const std::span<const std::byte> seg = tls_segment(p, sent);
      std::size_t put = 0;
      if (p.tls->write(seg.data(), seg.size(), &put) != TlsIo::kOk) return false;
      sent += put;
    }
    return true;
  }
  iovec iov[3];
  int cnt = 0;
  frame_iov(head, p.head_sent, iov, cnt);
  std::size_t want = 0;
  for (int k = 0; k < cnt; ++k) want += iov[k].iov_len;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<std::size_t>(cnt);
  const ssize_t n = ::sendmsg(p.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  return n >= 0 && static_cast<std::size_t>(n) == want;
}

void TcpLink::fail_peer_os(Peer& p, int err) {
  fail_peer(p,
            error(StatusCode::kPeerLost,
                  "connection to " + peer_name(p) + " failed: " + std::strerror(err)),
            false);
}

void TcpLink::fail_peer(Peer& p, Status st, bool always_log) {
  const bool pending = !p.posted.empty() || !p.sendq.empty() || p.state == RecvState::kDirect;
  if (always_log || (pending && !abort_.raised())) {
    params_.log.warn("dropping connection to " + peer_name(p) + ": " + st.message());
  }
  p.failed = st;
  p.tls.reset();  // before the socket it writes to goes
  p.tls_write_pending = false;
  ::close(p.fd);
  p.fd = -1;
  if (p.state == RecvState::kDirect) ops_[p.direct_op].finish(st);
  if (p.state == RecvState::kUnexpected) {
    p.unexpected_bytes -= p.unexpected.back().length;
    pool_.give_back(std::move(p.unexpected.back().bytes));
    p.unexpected.pop_back();
  }
  p.state = RecvState::kHeader;
  p.dst = nullptr;
  ops_.fail_queued(p.posted, p.sendq, st);
  p.head_sent = 0;
}

}  // namespace tributary::transport
