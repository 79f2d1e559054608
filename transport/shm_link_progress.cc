// The ShmLink's progress engine: copies queued sends into the peers' rings and arriving
// bytes out of them, rings doorbells, sleeps on the peers' connections, and turns a
// closed connection, a corrupted ring or an abort notice into per-peer errors.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "transport/shm_link_impl.h"

namespace tributary::transport {
namespace {

constexpr std::byte kDoorbell{0x44};               // 'D'
constexpr std::size_t kMaxNoticeBytes = 8 + 1024;  // code, origin, reason

timespec to_timespec(Duration d) {
  const auto ns = std::max<Duration::rep>(0, d.count());
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

}  // namespace

bool ShmLink::progress() {
  bool moved = false;
  for (Peer& p : peers_) {
    if (p.fd < 0 || !p.failed.is_ok()) continue;
    if (!p.sendq.empty()) moved |= push(p);
    moved |= pull(p);
  }
  return moved;
}

bool ShmLink::push(Peer& p) {
  bool moved = false;
  while (!p.sendq.empty()) {
    const std::uint32_t i = p.sendq.front();
    Op& op = ops_[i];
    std::size_t n;
    if (p.head_written < sizeof(RingHeader)) {
      n = p.out.write_some(reinterpret_cast<const std::byte*>(&op.header) + p.head_written,
                           sizeof(RingHeader) - p.head_written);
    } else {
      const std::size_t offset = p.head_written - sizeof(RingHeader);
      n = p.out.write_some(op.data + offset, std::min(kPieceBytes, op.size - offset));
    }
    if (n == 0) break;
    moved = true;
    p.head_written += n;
    params_.counters->add_sent(p.rank, n);
    if (p.out.consumer_needs_wake()) doorbell(p);
    if (p.head_written < sizeof(RingHeader) + op.size) continue;
    p.sendq.pop_front();
    p.head_written = 0;
    if (op.orphan) {
      ops_.free(i);
    } else {
      op.finish(Status());
    }
  }
  return moved;
}

bool ShmLink::pull(Peer& p) {
  bool moved = false;
  while (p.fd >= 0 && p.failed.is_ok()) {
    std::size_t n;
    if (p.state == Inbound::kHeader) {
      n = p.in.read_some(reinterpret_cast<std::byte*>(&p.header) + p.header_got,
                         sizeof(RingHeader) - p.header_got);
      p.header_got += n;
    } else if (p.state == Inbound::kDirect && ops_[p.direct_op].combine) {
      n = pull_combining(p);
    } else {
      std::byte* dst = p.dst == nullptr ? nullptr : p.dst + (p.length - p.remaining);
      n = p.in.read_some(
          dst, static_cast<std::size_t>(std::min<std::uint64_t>(p.remaining, kPieceBytes)));
      p.remaining -= n;
    }
    if (n == 0) break;
    moved = true;
    params_.counters->add_received(p.rank, n);
    if (p.in.producer_needs_wake()) doorbell(p);
    if (p.state == Inbound::kHeader) {
      if (p.header_got < sizeof(RingHeader)) continue;
      p.header_got = 0;
      begin_payload(p);
    } else if (p.remaining == 0) {
      end_payload(p);
    }
  }
  return moved;
}

std::size_t ShmLink::pull_combining(Peer& p) {
  const ShmRing::View v =
      p.in.peek(static_cast<std::size_t>(std::min<std::uint64_t>(p.remaining, kPieceBytes)));
  p.combining.feed(v.first, v.first_len);
  if (v.second_len > 0) p.combining.feed(v.second, v.second_len);
  p.in.consume(v.size());
  p.remaining -= v.size();
  return v.size();
}

void ShmLink::begin_payload(Peer& p) {
  const RingHeader& h = p.header;
  const std::uint64_t limit = h.kind == 1 ? kMaxNoticeBytes : params_.max_frame_bytes;
  if (h.magic != RingHeader::kMagic || h.kind > 1 || h.length > limit) {
    return fail_peer(p,
                     error(StatusCode::kBadFrame,
                           "corrupted shared-memory ring from " + peer_name(p) + ": header magic " +
                               std::to_string(h.magic) + ", kind " + std::to_string(h.kind) +
                               ", length " + std::to_string(h.length)),
                     true);
  }
  start_inbound(p, ops_, pool_, peer_name(p), algorithms::Tag{h.seq, h.slot, h.check}, h.length,
                h.kind == 1);
  if (p.state == Inbound::kDirect && ops_[p.direct_op].combine) {
    p.combining.start(*ops_[p.direct_op].combine, p.dst);
  }
  if (p.remaining == 0) end_payload(p);
}

void ShmLink::end_payload(Peer& p) {
  if (finish_inbound(p, ops_)) take_notice(p);
}

void ShmLink::take_notice(Peer& p) {
  std::optional<StreamNotice> n = parse_notice(p.notice);
  if (!n) {
    return fail_peer(p, error(StatusCode::kBadFrame, "bad abort notice from " + peer_name(p)),
                     true);
  }
  received_.push_back(ReceivedNotice{n->status, n->origin, std::move(n->reason)});
  fail_peer(p, std::move(n->status), false);
}

void ShmLink::doorbell(Peer& p) {
  [[maybe_unused]] ssize_t n = ::send(p.fd, &kDoorbell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  // EAGAIN: the connection is full of doorbells already, the peer will wake anyway.
}

void ShmLink::sleep(TimePoint until) {
  const TimePoint now = std::chrono::steady_clock::now();
  const bool block = until > now;
  {
    std::lock_guard io(io_mu_);
    if (abort_.raised()) return;
    if (block) {
      for (Peer& p : peers_) {
        if (p.fd < 0 || !p.failed.is_ok()) continue;
        p.in.set_consumer_sleeping(true);
        if (!p.sendq.empty()) p.out.set_producer_sleeping(true);
      }
      // Whatever was published before the flags went up is seen here.
      if (progress()) {
        for (Peer& p : peers_) {
          if (p.fd >= 0) {
            p.in.set_consumer_sleeping(false);
            p.out.set_producer_sleeping(false);
          }
        }
        return;
      }
    }
    pollfds_.clear();
    poll_peers_.clear();
    pollfds_.push_back(pollfd{abort_.wake_fd(), POLLIN, 0});
    for (Peer& p : peers_) {
      if (p.fd < 0) continue;
      pollfds_.push_back(pollfd{p.fd, static_cast<short>(POLLIN | POLLRDHUP), 0});
      poll_peers_.push_back(&p);
    }
  }
  const timespec ts = to_timespec(block ? until - now : Duration::zero());
  const int n = ::ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr);
  std::lock_guard io(io_mu_);
  for (Peer* p : poll_peers_) {
    if (p->fd < 0) continue;
    p->in.set_consumer_sleeping(false);
    p->out.set_producer_sleeping(false);
  }
  if (n <= 0 || abort_.raised()) return;
  for (std::size_t k = 0; k < poll_peers_.size(); ++k) {
    if (pollfds_[k + 1].revents != 0 && poll_peers_[k]->fd >= 0) drain_connection(*poll_peers_[k]);
  }
}

void ShmLink::drain_connection(Peer& p) {
  std::byte buf[256];
  for (;;) {
    const ssize_t n = ::recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    const int err = n < 0 ? errno : 0;
    // What the peer put in the ring before it went is still delivered.
    pull(p);
    if (p.fd < 0 || !p.failed.is_ok()) return;
    return fail_peer(
        p,
        error(StatusCode::kPeerLost,
              peer_name(p) + (err == 0 ? " closed the connection"
                                       : " connection failed: " + std::string(std::strerror(err)))),
        false);
  }
}

void ShmLink::notify_peers(const Status& reason) {
  std::string text = reason.message();
  auto origin = static_cast<std::uint32_t>(params_.rank);
  for (const ReceivedNotice& r : received_) {
    if (r.status.code() == reason.code() && r.status.message() == reason.message()) {
      origin = r.origin;  // relay the origin's own words
      text = r.reason;
      break;
    }
  }
  text.resize(std::min(text.size(), kMaxNoticeBytes - 8));
  std::vector<std::byte> payload(8 + text.size());
  const auto code = static_cast<std::uint32_t>(reason.code());
  std::memcpy(payload.data(), &code, 4);
  std::memcpy(payload.data() + 4, &origin, 4);
  std::memcpy(payload.data() + 8, text.data(), text.size());
  const RingHeader h{0, 0, 0, payload.size(), 1, RingHeader::kMagic};
  for (Peer& p : peers_) {
    if (p.fd < 0 || !p.failed.is_ok()) continue;
    std::size_t rest = 0;  // of a half-written message, which must go first
    if (!p.sendq.empty() && p.head_written > 0) {
      rest = sizeof(RingHeader) + ops_[p.sendq.front()].size - p.head_written;
    }
    if (p.out.free_bytes() < rest + sizeof(h) + payload.size()) continue;
    if (rest > 0) {
      const std::size_t offset = p.head_written - sizeof(RingHeader);
      p.out.write_some(ops_[p.sendq.front()].data + offset, rest);
    }
    p.out.write_some(reinterpret_cast<const std::byte*>(&h), sizeof(h));
    p.out.write_some(payload.data(), payload.size());
    doorbell(p);
  }
}

void ShmLink::fail_peer(Peer& p, Status st, bool always_log) {
  const bool receiving = p.state == Inbound::kDirect;
  if (always_log || (!abort_.raised() && (receiving || !p.posted.empty() || !p.sendq.empty()))) {
    params_.log.warn("dropping shared-memory link to " + peer_name(p) + ": " + st.message());
  }
  if (receiving) p.posted.push_back(p.direct_op);  // half-received: fails with the rest
  if (p.state == Inbound::kUnexpected) {
    pool_.give_back(std::move(p.arrived.back().bytes));
    p.arrived.pop_back();
  }
  ops_.fail_queued(p.posted, p.sendq, st);
  ::close(p.fd);
  p.fd = -1;
  p.failed = std::move(st);
  p.state = Inbound::kHeader;
  p.dst = nullptr;
  p.head_written = 0;
}

}  // namespace tributary::transport
