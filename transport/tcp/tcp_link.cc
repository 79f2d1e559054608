// The TcpLink's operations: posting sends and receives, waiting, aborting, and the
// table of operations in flight. The bytes move in tcp_link_progress.cc.
#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/crc32c.h"
#include "transport/stream_inbound.h"
#include "transport/tcp/congestion.h"
#include "transport/tcp/tcp_link_impl.h"
#include "transport/tcp/tls_stream.h"

namespace tributary::transport {

TcpLink::TcpLink(TcpLinkParams params, std::vector<PeerSocket> sockets, int wake_fd)
    : params_(std::move(params)), peers_(static_cast<std::size_t>(params_.size)), abort_(wake_fd) {
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
    set_same_host_congestion(p.fd, params_.same_host_congestion);
    p.address = std::move(s.address);
    p.staging.reset(new std::byte[kStagingBytes]);
    if (s.tls) {
      p.tls = std::move(s.tls);
      p.tls_scratch.reset(new std::byte[kTlsCoalesceBytes]);
      any_tls_ = true;
    }
  }
  for (Peer& p : peers_) {
    if (p.rank == params_.rank || p.fd >= 0) continue;
    TRIB_CHECK(!params_.unconnected.is_ok()) << "no socket for rank " << p.rank;
    p.failed = params_.unconnected;
  }
}

TcpLink::~TcpLink() {
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::close(p.fd);
  }
}

algorithms::Link::Handle TcpLink::send(int peer, algorithms::Tag tag,
                                       std::span<const std::byte> data) {
  return send_stamped(peer, tag, data, 0);
}

algorithms::Link::Handle TcpLink::send_stamped(int peer, algorithms::Tag tag,
                                               std::span<const std::byte> data,
                                               std::uint64_t stamp) {
  check_peer(peer);
  const std::uint32_t i =
      ops_.alloc(true, peer, tag, const_cast<std::byte*>(data.data()), data.size());
  Op& op = ops_[i];
  FrameHeader header{params_.epoch, tag.seq, tag.slot, tag.check, data.size()};
  header.stamp = stamp;
  op.header = encode_frame_header(header);
  op.crc = 0;
  // A small payload (up to 64 KiB) is checksummed now, so that its frame leaves in one
  // write; a larger one as it goes out (account_sent), so that its first bytes need not
  // wait for a pass over all of it.
  op.trailer_ready = data.size() <= kStagingBytes;
  if (op.trailer_ready) op.trailer = encode_frame_trailer(crc32c(data));
  std::lock_guard io(io_mu_);
  if (Peer& p = peers_[peer]; ops_.queue_send(i, p, abort_)) flush(p);
  return ops_.handle_of(i);
}

algorithms::Link::Handle TcpLink::recv(int peer, algorithms::Tag tag, std::span<std::byte> data) {
  return receive(peer, tag, data, std::nullopt);
}

algorithms::Link::Handle TcpLink::recv_combine(int peer, algorithms::Tag tag,
                                               std::span<std::byte> data,
                                               const algorithms::Combine& c) {
  TRIB_CHECK(data.size() % dtype_size(c.dtype) == 0) << "partial element";
  return receive(peer, tag, data, c);
}

algorithms::Link::Handle TcpLink::receive(int peer, algorithms::Tag tag, std::span<std::byte> data,
                                          const std::optional<algorithms::Combine>& combine) {
  check_peer(peer);
  const std::uint32_t i = ops_.alloc(false, peer, tag, data.data(), data.size());
  ops_[i].combine = combine;
  std::lock_guard io(io_mu_);
  post_recv(i);
  return ops_.handle_of(i);
}

void TcpLink::post_recv(std::uint32_t i) {
  Op& op = ops_[i];
  Peer& p = peers_[op.peer];
  auto u = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                        [&](const transport::EarlyMessage& m) { return m.tag == op.tag; });
  if (abort_.raised() && (u == p.unexpected.end() || !u->deliverable_after_abort())) {
    op.finish(abort_.status());
    return;
  }
  if (u == p.unexpected.end()) {
    if (p.failed.is_ok()) {
      p.posted.push_back(i);
      resume(p);  // the frame it stalled on may be this one
    } else {
      op.finish(p.failed);
    }
    return;
  }
  const bool in_flight = !u->complete;
  op.stamp = u->stamp;
  Status st = transport::fits(op, u->length, u->tag.check)
                  ? Status()
                  : transport::match_status(peer_name(p), op, u->length, u->tag.check);
  const std::uint64_t have = in_flight ? u->length - p.remaining : u->length;
  if (st.is_ok() && have > 0) {
    if (op.combine) {
      // An arriving one is the payload in progress, whose rest the peer's cursor takes;
      // a whole one may be taken while another payload is in progress.
      transport::CombineCursor local;
      transport::CombineCursor& cursor = in_flight ? p.combining : local;
      cursor.start(*op.combine, op.data);
      cursor.feed(u->bytes.get(), have);
    } else {
      std::memcpy(op.data, u->bytes.get(), have);
    }
    params_.counters->bytes_copied_unexpected.fetch_add(have, std::memory_order_relaxed);
  } else if (st.is_ok() && op.combine) {
    p.combining.start(*op.combine, op.data);
  }
  if (st.is_ok() && in_flight) {
    // The rest of this payload goes straight into the caller's buffer.
    p.state = RecvState::kDirect;
    p.dst = op.data;
    p.direct_op = i;
  } else {
    if (in_flight) {
      p.state = RecvState::kDiscard;
      p.dst = nullptr;
    }
    op.finish(std::move(st));
  }
  p.unexpected_bytes -= u->length;
  pool_.give_back(std::move(u->bytes));
  p.unexpected.erase(u);
  resume(p);
}

Status TcpLink::wait(Handle handle, Deadline deadline) {
  const std::uint32_t i = ops_.index_of(handle);
  if (ops_[i].done) return ops_.release(i);  // no clock reading for what is over already
  // Spin until busy_poll has passed since the last look that found a socket ready, then
  // sleep in poll(2): a payload that arrives over many reads keeps the wait spinning
  // instead of costing a wake-up per segment (and the sender's wake-up call with it).
  TimePoint spin_until = std::chrono::steady_clock::now() + params_.busy_poll;
  for (;;) {
    Op& op = ops_[i];
    if (op.done) return ops_.release(i);
    if (abort_.raised()) {
      ops_.free(i);
      return abort_.status();
    }
    const TimePoint now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) return time_out(i);
    const bool spinning = now < spin_until;
    if (progress(spinning ? Duration::zero() : deadline.at - now, deadline,
                 params_.yield_while_spinning)) {
      spin_until = std::chrono::steady_clock::now() + params_.busy_poll;
    }
  }
}

std::uint64_t TcpLink::stamp(Handle handle) const { return ops_[ops_.index_of(handle)].stamp; }

void TcpLink::report_early(int peer, std::vector<algorithms::EarlyArrival>& out) {
  check_peer(peer);
  transport::report_early_messages(peers_[peer].unexpected, out);
}

bool TcpLink::test(Handle handle) { return ops_[ops_.index_of(handle)].done || abort_.raised(); }

void TcpLink::drive(Deadline until) {
  if (abort_.raised()) return;
  const TimePoint now = std::chrono::steady_clock::now();
  // A look without blocking (a failover link glancing at its standby paths) must not give
  // the CPU away; a blocking drive may.
  const bool look = until.passed(now);
  progress(look ? Duration::zero() : until.at - now, until, !look);
}

bool TcpLink::look() {
  if (!abort_.raised()) (void)progress(Duration::zero(), Deadline{TimePoint::min()}, false);
  return false;
}

void TcpLink::abort(const Status& reason) {
  transport::abort_stream_link(abort_, io_mu_, peers_, reason,
                               [this](const Status& r) { notify_peers(r); });
}

Status TcpLink::time_out(std::uint32_t i) {
  std::lock_guard io(io_mu_);
  Peer& p = peers_[ops_[i].peer];
  return ops_.time_out(i, p, p.head_sent > 0 || p.tls_write_pending, RecvState::kDirect, RecvState::kDiscard,
                       peer_name(p));
}

void TcpLink::replace_peer(PeerSocket socket) {
  std::lock_guard io(io_mu_);
  Peer& p = peers_[socket.rank];
  if (p.fd >= 0) {
    fail_peer(p, error(StatusCode::kPeerLost, "the connection to " + peer_name(p) + " was replaced"),
              false);
  }
  for (transport::EarlyMessage& m : p.unexpected) pool_.give_back(std::move(m.bytes));
  p.unexpected.clear();
  p.unexpected_bytes = 0;
  p.stalled = false;
  p.state = RecvState::kHeader;
  p.dst = nullptr;
  p.length = 0;
  p.remaining = 0;
  p.trailer_left = 0;
  p.stage_begin = 0;
  p.stage_end = 0;
  p.notice.clear();
  p.logged_stale = false;
  p.head_sent = 0;
  p.tls_write_pending = false;
  p.fd = socket.fd;
  set_same_host_congestion(p.fd, params_.same_host_congestion);
  p.address = std::move(socket.address);
  if (!p.staging) p.staging.reset(new std::byte[kStagingBytes]);
  p.tls = std::move(socket.tls);
  if (p.tls) {
    if (!p.tls_scratch) p.tls_scratch.reset(new std::byte[kTlsCoalesceBytes]);
    any_tls_ = true;
  }
  p.failed = Status();
  params_.log.info("epoch " + std::to_string(params_.epoch) + ": a new connection to " +
                   peer_name(p) + " carries the pair");
}

Status replace_peer_socket(algorithms::Link& link, PeerSocket socket) {
  auto* tcp = dynamic_cast<TcpLink*>(&link);
  if (tcp == nullptr || socket.rank < 0 || socket.rank >= tcp->size() ||
      socket.rank == tcp->rank() || socket.fd < 0) {
    socket.tls.reset();
    if (socket.fd >= 0) ::close(socket.fd);
    return error(StatusCode::kInvalidArgument,
                 tcp == nullptr ? "a new connection for a link that is not TCP"
                                : "a new connection for rank " + std::to_string(socket.rank) +
                                      ", not a peer of this link");
  }
  tcp->replace_peer(std::move(socket));
  return Status();
}

Result<std::unique_ptr<algorithms::Link>> make_tcp_link(TcpLinkParams params,
                                                        std::vector<PeerSocket> peers) {
  return transport::make_stream_link<TcpLink>(Status(), std::move(params), std::move(peers));
}

}  // namespace tributary::transport
