// The RdmaLink's progress engine: polls the completion queue, copies arriving chunks out
// (reposting their slots, owing the peer a credit), packs queued sends into chunks as the
// credits allow, sleeps on the completion channel and the peers' connections, and turns
// a closed connection, a failed completion, a bad chunk or an abort notice into per-peer
// errors.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <thread>
#include <utility>

#include "transport/channel_io.h"
#include "transport/rdma_link_impl.h"

namespace tributary::transport {
namespace {


timespec to_timespec(Duration d) {
  const auto ns = std::max<Duration::rep>(0, d.count());
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

}  // namespace

bool RdmaLink::progress() {
  bool moved = poll_completions();
  for (Peer& p : peers_) {
    if (p.fd < 0 || !p.failed.is_ok()) continue;
    if (!p.sendq.empty() || p.owed >= owed_threshold_) moved |= push(p);
  }
  return moved;
}

bool RdmaLink::poll_completions() {
  bool moved = false;
  for (;;) {
    const std::size_t n = group_->poll(completions_);
    for (std::size_t k = 0; k < n; ++k) on_completion(completions_[k]);
    moved |= n > 0;
    if (n < completions_.size()) return moved;
  }
}

void RdmaLink::on_completion(const VerbsCompletion& c) {
  const bool is_recv = (c.wr_id & kRecvBit) != 0;
  const auto rank = static_cast<int>((c.wr_id & ~kRecvBit) >> 32);
  const auto slot = static_cast<std::uint32_t>(c.wr_id);
  TRIB_CHECK(rank >= 0 && rank < params_.size && rank != params_.rank)
      << "completion for no peer: wr_id " << c.wr_id;
  Peer& p = peers_[rank];
  if (!is_recv) {
    --p.sends_in_flight;
    p.free_send.push_back(slot);
  }
  if (p.fd < 0 || !p.failed.is_ok()) return;  // flushed after the peer failed
  if (!c.status.is_ok()) {
    return fail_peer(
        p,
        error(StatusCode::kPeerLost,
              peer_name(p) + (is_recv ? ": receive" : ": send") + " failed: " + c.status.message()),
        false);
  }
  if (is_recv) on_chunk(p, slot, c.byte_len);
}

void RdmaLink::on_chunk(Peer& p, std::uint32_t slot, std::uint32_t byte_len) {
  const std::span<const std::byte> bytes = group_->recv_slot(p.rank, slot);
  ChunkPrefix prefix;
  if (byte_len >= sizeof(prefix) && byte_len <= bytes.size()) {
    std::memcpy(&prefix, bytes.data(), sizeof(prefix));
  }
  if (byte_len < sizeof(prefix) || byte_len > bytes.size() ||
      prefix.bytes != byte_len - sizeof(prefix) || prefix.credits > p.credit_limit ||
      p.credits + prefix.credits > p.credit_limit) {
    return fail_peer(p,
                     error(StatusCode::kBadFrame,
                           "bad rdma chunk from " + peer_name(p) + ": " + std::to_string(byte_len) +
                               " bytes, announcing " + std::to_string(prefix.bytes) +
                               " and returning " + std::to_string(prefix.credits) + " credits"),
                     true);
  }
  p.credits += prefix.credits;
  params_.counters->add_received(p.rank, byte_len);
  unpack(p, bytes.subspan(sizeof(prefix), prefix.bytes));
  if (p.fd < 0 || !p.failed.is_ok()) return;
  Status st = group_->post_recv(p.rank, slot, wr_id_of(true, p.rank, slot));
  if (!st.is_ok()) {
    return fail_peer(p,
                     error(StatusCode::kPeerLost,
                           "cannot repost a receive for " + peer_name(p) + ": " + st.message()),
                     true);
  }
  ++p.owed;
}

bool RdmaLink::push(Peer& p) {
  bool moved = false;
  while (p.fd >= 0 && p.failed.is_ok() && !p.free_send.empty()) {
    // Data keeps the last credit back: it is for returning credits (see rdma_link.h).
    const bool data = !p.sendq.empty() && p.credits >= 2;
    if (!data && !(p.owed >= owed_threshold_ && p.credits >= 1)) break;
    const std::uint32_t slot = p.free_send.back();
    p.free_send.pop_back();
    const std::span<std::byte> out = group_->send_slot(p.rank, slot).first(p.chunk_bytes);
    const std::size_t n = data ? pack(p, out.subspan(sizeof(ChunkPrefix))) : 0;
    moved = true;
    if (Status st = post_chunk(p, slot, static_cast<std::uint32_t>(n)); !st.is_ok()) {
      fail_peer(
          p, error(StatusCode::kPeerLost, "cannot send to " + peer_name(p) + ": " + st.message()),
          true);
      break;
    }
  }
  return moved;
}

std::size_t RdmaLink::pack(Peer& p, std::span<std::byte> out) {
  std::size_t used = 0;
  while (used < out.size() && !p.sendq.empty()) {
    const std::uint32_t i = p.sendq.front();
    Op& op = ops_[i];
    std::size_t n;
    if (p.head_written < sizeof(RdmaHeader)) {
      n = std::min(sizeof(RdmaHeader) - p.head_written, out.size() - used);
      std::memcpy(out.data() + used,
                  reinterpret_cast<const std::byte*>(&op.header) + p.head_written, n);
    } else {
      const std::size_t offset = p.head_written - sizeof(RdmaHeader);
      n = std::min(op.size - offset, out.size() - used);
      if (n > 0) std::memcpy(out.data() + used, op.data + offset, n);
    }
    used += n;
    p.head_written += n;
    if (p.head_written < sizeof(RdmaHeader) + op.size) continue;
    p.sendq.pop_front();
    p.head_written = 0;
    if (op.orphan) {
      ops_.free(i);
    } else {
      op.finish(Status());
    }
  }
  return used;
}

Status RdmaLink::post_chunk(Peer& p, std::uint32_t slot, std::uint32_t stream_bytes) {
  const ChunkPrefix prefix{p.owed, stream_bytes};
  std::memcpy(group_->send_slot(p.rank, slot).data(), &prefix, sizeof(prefix));
  const auto bytes = static_cast<std::uint32_t>(sizeof(prefix)) + stream_bytes;
  Status st = group_->post_send(p.rank, slot, bytes, wr_id_of(false, p.rank, slot));
  if (!st.is_ok()) {
    p.free_send.push_back(slot);
    return st;
  }
  p.owed = 0;
  --p.credits;
  ++p.sends_in_flight;
  params_.counters->add_sent(p.rank, bytes);
  return Status();
}

void RdmaLink::unpack(Peer& p, std::span<const std::byte> bytes) {
  std::size_t at = 0;
  while (at < bytes.size() && p.fd >= 0 && p.failed.is_ok()) {
    if (p.state == Inbound::kHeader) {
      const std::size_t n = std::min(sizeof(RdmaHeader) - p.header_got, bytes.size() - at);
      std::memcpy(reinterpret_cast<std::byte*>(&p.header) + p.header_got, bytes.data() + at, n);
      p.header_got += n;
      at += n;
      if (p.header_got < sizeof(RdmaHeader)) continue;
      p.header_got = 0;
      begin_payload(p);
      continue;
    }
    const auto n =
        static_cast<std::size_t>(std::min<std::uint64_t>(p.remaining, bytes.size() - at));
    if (p.dst != nullptr && n > 0) {
      std::memcpy(p.dst + (p.length - p.remaining), bytes.data() + at, n);
    }
    p.remaining -= n;
    at += n;
    if (p.remaining == 0) end_payload(p);
  }
}

void RdmaLink::begin_payload(Peer& p) {
  const RdmaHeader& h = p.header;
  const std::uint64_t limit = h.kind == 1 ? kMaxNoticeBytes : params_.max_frame_bytes;
  if (h.magic != RdmaHeader::kMagic || h.kind > 1 || h.length > limit) {
    return fail_peer(
        p,
        error(StatusCode::kBadFrame,
              "bad rdma stream from " + peer_name(p) + ": header magic " + std::to_string(h.magic) +
                  ", kind " + std::to_string(h.kind) + ", length " + std::to_string(h.length)),
        true);
  }
  start_inbound(
      p, ops_, pool_, [&] { return peer_name(p); }, algorithms::Tag{h.seq, h.slot, h.check},
      h.length, 0, h.kind == 1);
  if (p.remaining == 0) end_payload(p);
}

void RdmaLink::end_payload(Peer& p) {
  if (finish_inbound(p, ops_)) take_notice(p);
}

void RdmaLink::take_notice(Peer& p) {
  std::optional<StreamNotice> n = parse_notice(p.notice);
  if (!n) {
    return fail_peer(p, error(StatusCode::kBadFrame, "bad abort notice from " + peer_name(p)),
                     true);
  }
  received_.push_back(*n);
  fail_peer(p, std::move(n->status), false);
}

void RdmaLink::sleep(TimePoint until) {
  const TimePoint now = std::chrono::steady_clock::now();
  Duration block_for = until > now ? until - now : Duration::zero();
  {
    std::lock_guard io(io_mu_);
    if (abort_.raised()) return;
    if (block_for > Duration::zero()) {
      if (Status armed = group_->arm(); !armed.is_ok()) {
        // Without an armed queue no event wakes the sleep: look again every millisecond.
        block_for = std::min<Duration>(block_for, std::chrono::milliseconds(1));
      }
      // Whatever completed before the queue was armed is seen here.
      if (progress()) return;
    }
    pollfds_.clear();
    poll_peers_.clear();
    pollfds_.push_back(pollfd{abort_.wake_fd(), POLLIN, 0});
    pollfds_.push_back(pollfd{group_->wake_fd(), POLLIN, 0});
    for (Peer& p : peers_) {
      if (p.fd < 0) continue;
      pollfds_.push_back(pollfd{p.fd, static_cast<short>(POLLIN | POLLRDHUP), 0});
      poll_peers_.push_back(&p);
    }
  }
  const timespec ts = to_timespec(block_for);
  const int n = ::ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr);
  std::lock_guard io(io_mu_);
  if (n <= 0 || abort_.raised()) return;
  if (pollfds_[1].revents != 0) group_->clear_wakeups();
  for (std::size_t k = 0; k < poll_peers_.size(); ++k) {
    if (pollfds_[k + 2].revents != 0 && poll_peers_[k]->fd >= 0) drain_connection(*poll_peers_[k]);
  }
}

void RdmaLink::drain_connection(Peer& p) {
  Status lost = drain_channel(p.fd, peer_name(p));
  if (lost.is_ok()) return;
  // Chunks the peer sent before it went, already in the completion queue, are delivered.
  poll_completions();
  if (p.fd < 0 || !p.failed.is_ok()) return;
  fail_peer(p, std::move(lost), false);
}

void RdmaLink::notify_peers(const Status& reason) {
  const std::vector<std::byte> payload =
      encode_notice(reason, received_, static_cast<std::uint32_t>(params_.rank));
  const RdmaHeader h{0, 0, 0, payload.size(), 1, RdmaHeader::kMagic};
  for (Peer& p : peers_) {
    if (p.fd < 0 || !p.failed.is_ok()) continue;
    // A half-sent message must be finished first, or the peer's stream would not parse.
    std::size_t rest = 0;
    const Op* head = p.sendq.empty() || p.head_written == 0 ? nullptr : &ops_[p.sendq.front()];
    if (head != nullptr) rest = sizeof(RdmaHeader) + head->size - p.head_written;
    const std::size_t room = p.chunk_bytes - sizeof(ChunkPrefix);
    const std::size_t chunks = (rest + sizeof(h) + payload.size() + room - 1) / room;
    if (chunks > p.credits || chunks > p.free_send.size()) continue;
    std::vector<std::byte> stream;
    stream.reserve(rest + sizeof(h) + payload.size());
    if (head != nullptr) {
      const auto* header = reinterpret_cast<const std::byte*>(&head->header);
      if (p.head_written < sizeof(RdmaHeader)) {
        stream.insert(stream.end(), header + p.head_written, header + sizeof(RdmaHeader));
      }
      const std::size_t offset =
          p.head_written > sizeof(RdmaHeader) ? p.head_written - sizeof(RdmaHeader) : 0;
      stream.insert(stream.end(), head->data + offset, head->data + head->size);
    }
    const auto* hb = reinterpret_cast<const std::byte*>(&h);
    stream.insert(stream.end(), hb, hb + sizeof(h));
    stream.insert(stream.end(), payload.begin(), payload.end());
    send_now(p, stream);
  }
}

bool RdmaLink::send_now(Peer& p, std::span<const std::byte> stream) {
  const std::size_t room = p.chunk_bytes - sizeof(ChunkPrefix);
  for (std::size_t at = 0; at < stream.size();) {
    if (p.free_send.empty() || p.credits == 0) return false;
    const std::uint32_t slot = p.free_send.back();
    p.free_send.pop_back();
    const std::size_t n = std::min(room, stream.size() - at);
    std::memcpy(group_->send_slot(p.rank, slot).data() + sizeof(ChunkPrefix), stream.data() + at,
                n);
    if (!post_chunk(p, slot, static_cast<std::uint32_t>(n)).is_ok()) return false;
    at += n;
  }
  return true;
}

void RdmaLink::settle(Duration limit) {
  const Deadline until = Deadline::after(limit);
  auto in_flight = [this] {
    return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) {
      return p.fd >= 0 && p.failed.is_ok() && p.sends_in_flight > 0;
    });
  };
  while (in_flight() && !until.passed()) {
    const std::size_t n = group_->poll(completions_);
    for (std::size_t k = 0; k < n; ++k) {
      const VerbsCompletion& c = completions_[k];
      if ((c.wr_id & kRecvBit) != 0) continue;  // the link is aborted: nobody reads it
      Peer& p = peers_[static_cast<std::size_t>(c.wr_id >> 32)];
      --p.sends_in_flight;
      p.free_send.push_back(static_cast<std::uint32_t>(c.wr_id));
      if (!c.status.is_ok()) p.failed = c.status;
    }
    if (n == 0) std::this_thread::yield();
  }
}

void RdmaLink::fail_peer(Peer& p, Status st, bool always_log) {
  const bool receiving = p.state == Inbound::kDirect;
  if (always_log || (!abort_.raised() && (receiving || !p.posted.empty() || !p.sendq.empty()))) {
    params_.log.warn("dropping rdma link to " + peer_name(p) + ": " + st.message());
  }
  fail_stream_peer(p, ops_, pool_, std::move(st));
}

}  // namespace tributary::transport
