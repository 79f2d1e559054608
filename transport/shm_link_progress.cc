// The ShmLink's progress engine: copies queued sends into the peers' rings and arriving
// bytes out of them, rings doorbells, sleeps on the peers' connections, and turns a
// closed connection, a corrupted ring or an abort notice into per-peer errors.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "transport/channel_io.h"
#include "transport/cross_memory.h"
#include "transport/shm_link_impl.h"

namespace tributary::transport {
namespace {

constexpr std::byte kDoorbell{0x44};               // 'D'
// A combining receive of a single-copy message reads it in pieces this large, which stay
// in cache between the read and the reduction.
constexpr std::size_t kBounceBytes = 64 * 1024;

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
      n = p.out.write_some(op.ring_data() + offset, std::min(kPieceBytes, op.ring_bytes() - offset));
    }
    if (n == 0) break;
    moved = true;
    p.head_written += n;
    params_.counters->add_sent(p.rank, n);
    if (p.out.consumer_needs_wake()) doorbell(p);
    if (p.head_written < sizeof(RingHeader) + op.ring_bytes()) continue;
    p.sendq.pop_front();
    p.head_written = 0;
    if (op.single_copy) {
      // Done when the peer says it has read the buffer.
      p.awaiting[op.body.token] = ops_.handle_of(i);
      params_.counters->add_sent(p.rank, op.size);
    } else if (op.orphan) {
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
  const std::uint64_t limit = h.kind == RingHeader::kNotice ? kMaxNoticeBytes
                              : h.kind == RingHeader::kAck  ? 0
                                                            : params_.max_frame_bytes;
  if (h.magic != RingHeader::kMagic || h.kind > RingHeader::kAck || h.length > limit) {
    return fail_peer(p,
                     error(StatusCode::kBadFrame,
                           "corrupted shared-memory ring from " + peer_name(p) + ": header magic " +
                               std::to_string(h.magic) + ", kind " + std::to_string(h.kind) +
                               ", length " + std::to_string(h.length)),
                     true);
  }
  if (h.kind == RingHeader::kAck) return take_ack(p, h.seq);
  if (h.kind == RingHeader::kSingleCopy) {
    if (!p.read_peer) {
      return fail_peer(p,
                       error(StatusCode::kBadFrame, peer_name(p) +
                                                        " sent a single-copy message, but its "
                                                        "memory cannot be read from here"),
                       true);
    }
    // The descriptor's body follows in the ring.
    p.incoming_tag = algorithms::Tag{h.seq, h.slot, h.check};
    p.incoming_length = h.length;
    p.incoming_stamp = h.stamp;
    p.state = Inbound::kSingleCopy;
    p.dst = reinterpret_cast<std::byte*>(&p.incoming);
    p.length = p.remaining = sizeof(SingleCopyBody);
    return;
  }
  start_inbound(
      p, ops_, pool_, [&] { return peer_name(p); }, algorithms::Tag{h.seq, h.slot, h.check},
      h.length, h.stamp, h.kind == RingHeader::kNotice);
  if (p.state == Inbound::kDirect && ops_[p.direct_op].combine) {
    p.combining.start(*ops_[p.direct_op].combine, p.dst);
  }
  if (p.remaining == 0) end_payload(p);
}

void ShmLink::end_payload(Peer& p) {
  if (p.state == Inbound::kSingleCopy) {
    p.state = Inbound::kHeader;
    p.dst = nullptr;
    return take_single_copy(p);
  }
  if (finish_inbound(p, ops_)) take_notice(p);
}

void ShmLink::take_single_copy(Peer& p) {
  const std::optional<std::uint32_t> posted = ops_.take_posted(p.posted, p.incoming_tag);
  if (posted) {
    ops_[*posted].stamp = p.incoming_stamp;
    return deliver_single_copy(p, *posted, p.incoming.address, p.incoming.token,
                               p.incoming_length);
  }
  EarlyMessage& m = p.arrived.emplace_back();
  m.tag = p.incoming_tag;
  m.length = p.incoming_length;
  m.stamp = p.incoming_stamp;
  m.complete = true;
  m.single_copy = true;
  m.remote = p.incoming.address;
  m.token = p.incoming.token;
}

void ShmLink::deliver_single_copy(Peer& p, std::uint32_t i, std::uint64_t remote,
                                  std::uint64_t token, std::uint64_t length) {
  Op& op = ops_[i];
  Status st = fits(op, length, op.tag.check) ? Status()
                                             : match_status(peer_name(p), op, length, op.tag.check);
  if (st.is_ok() && op.combine) {
    if (!bounce_) bounce_.reset(new std::byte[kBounceBytes]);
    CombineCursor cursor;
    cursor.start(*op.combine, op.data);
    for (std::uint64_t at = 0; st.is_ok() && at < length; at += kBounceBytes) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBounceBytes, length - at));
      st = cma_read(p.peer_pid, remote + at, bounce_.get(), n);
      if (st.is_ok()) cursor.feed(bounce_.get(), n);
    }
  } else if (st.is_ok() && length > 0) {
    st = cma_read(p.peer_pid, remote, op.data, static_cast<std::size_t>(length));
  }
  params_.counters->add_received(p.rank, length);
  const bool mismatch = st.code() == StatusCode::kMismatch;
  if (!st.is_ok() && !mismatch) {
    // An address the peer named that cannot be read (or the peer is gone): the pair is
    // broken, as by a corrupt ring.
    op.finish(st);
    return fail_peer(p, error(st.code(), peer_name(p) + ": " + st.message()), true);
  }
  op.finish(std::move(st));
  queue_control(p, RingHeader{token, 0, 0, 0, RingHeader::kAck, RingHeader::kMagic});
}

bool ShmLink::read_early_single_copies() {
  bool read = false;
  for (Peer& p : peers_) {
    if (p.fd < 0 || !p.failed.is_ok()) continue;
    for (EarlyMessage& m : p.arrived) {
      if (!m.single_copy) continue;
      const auto length = static_cast<std::size_t>(m.length);
      PayloadPool::Buffer bytes = pool_.take(length);
      const Status st = length > 0 ? cma_read(p.peer_pid, m.remote, bytes.get(), length) : Status();
      if (!st.is_ok()) {
        pool_.give_back(std::move(bytes));
        fail_peer(p, error(st.code(), peer_name(p) + ": " + st.message()), true);
        break;  // fail_peer let go of what had arrived
      }
      params_.counters->add_received(p.rank, length);
      m.bytes = std::move(bytes);
      m.single_copy = false;
      queue_control(p, RingHeader{m.token, 0, 0, 0, RingHeader::kAck, RingHeader::kMagic});
      read = true;
    }
  }
  return read;
}

void ShmLink::take_ack(Peer& p, std::uint64_t token) {
  const auto it = p.awaiting.find(token);
  if (it == p.awaiting.end()) return;  // its waiter gave up (wait's deadline)
  const Handle h = it->second;
  p.awaiting.erase(it);
  const auto low = static_cast<std::uint32_t>(h & 0xffffffffu);
  if (low == 0 || low > ops_.capacity()) return;
  Op& op = ops_[low - 1];
  if (!op.in_use || op.generation != (h >> 32)) return;
  if (op.orphan) {
    ops_.free(low - 1);
  } else {
    op.finish(Status());
  }
}

void ShmLink::queue_control(Peer& p, const RingHeader& h) {
  const std::uint32_t i = ops_.alloc(true, p.rank, algorithms::Tag{h.seq, 0, 0}, nullptr, 0);
  Op& op = ops_[i];
  op.header = h;
  op.single_copy = false;
  op.orphan = true;  // nobody waits: freed once written
  if (ops_.queue_send(i, p, abort_)) {
    push(p);
  } else if (op.done) {
    ops_.free(i);
  }
}

void ShmLink::take_notice(Peer& p) {
  std::optional<StreamNotice> n = parse_notice(p.notice);
  if (!n) {
    return fail_peer(p, error(StatusCode::kBadFrame, "bad abort notice from " + peer_name(p)),
                     true);
  }
  received_.push_back(*n);
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
  Status lost = drain_channel(p.fd, peer_name(p));
  if (lost.is_ok()) return;
  // What the peer put in the ring before it went is still delivered.
  pull(p);
  if (p.fd < 0 || !p.failed.is_ok()) return;
  fail_peer(p, std::move(lost), false);
}

void ShmLink::notify_peers(const Status& reason) {
  const std::vector<std::byte> payload =
      encode_notice(reason, received_, static_cast<std::uint32_t>(params_.rank));
  const RingHeader h{0, 0, 0, payload.size(), 1, RingHeader::kMagic};
  for (Peer& p : peers_) {
    if (p.fd < 0 || !p.failed.is_ok()) continue;
    std::size_t rest = 0;  // of a half-written message, which must go first
    if (!p.sendq.empty() && p.head_written > 0) {
      rest = sizeof(RingHeader) + ops_[p.sendq.front()].ring_bytes() - p.head_written;
    }
    if (p.out.free_bytes() < rest + sizeof(h) + payload.size()) continue;
    if (rest > 0) {
      const Op& head = ops_[p.sendq.front()];
      if (p.head_written < sizeof(RingHeader)) {
        const std::size_t in_header = sizeof(RingHeader) - p.head_written;
        p.out.write_some(reinterpret_cast<const std::byte*>(&head.header) + p.head_written,
                         in_header);
        p.out.write_some(head.ring_data(), head.ring_bytes());
      } else {
        const std::size_t offset = p.head_written - sizeof(RingHeader);
        p.out.write_some(head.ring_data() + offset, rest);
      }
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
  // Single-copy sends the peer will never acknowledge now.
  for (const auto& [token, h] : p.awaiting) {
    const auto low = static_cast<std::uint32_t>(h & 0xffffffffu);
    if (low == 0 || low > ops_.capacity()) continue;
    Op& op = ops_[low - 1];
    if (!op.in_use || op.generation != (h >> 32)) continue;
    if (op.orphan) {
      ops_.free(low - 1);
    } else {
      op.finish(st);
    }
  }
  p.awaiting.clear();
  fail_stream_peer(p, ops_, pool_, std::move(st));
}

}  // namespace tributary::transport
