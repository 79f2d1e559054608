// The ShmLink's operations: posting sends and receives, waiting, aborting, and the table
// of operations in flight. The bytes move in shm_link_progress.cc.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transport/cross_memory.h"
#include "transport/polling_wait.h"
#include "transport/shm_link_impl.h"

namespace tributary::transport {
ShmLink::ShmLink(ShmLinkParams params, std::vector<ShmPeer> peers, int wake_fd)
    : params_(std::move(params)), peers_(static_cast<std::size_t>(params_.size)), abort_(wake_fd) {
  TRIB_CHECK(params_.counters != nullptr && params_.counters->size() == params_.size);
  TRIB_CHECK(params_.rank >= 0 && params_.rank < params_.size);
  TRIB_CHECK(peers.size() < peers_.size()) << "more segments than peers: " << peers.size();
  for (ShmPeer& s : peers) {
    TRIB_CHECK(s.rank >= 0 && s.rank < params_.size && s.rank != params_.rank && s.fd >= 0 &&
               peers_[s.rank].fd < 0)
        << "bad or repeated shared-memory peer " << s.rank;
    Peer& p = peers_[s.rank];
    p.rank = s.rank;
    p.fd = s.fd;
    p.address = std::move(s.address);
    p.self_is_low = params_.rank < s.rank;
    p.segment = std::move(s.segment);
    p.out = p.segment.outgoing(p.self_is_low);
    p.in = p.segment.incoming(p.self_is_low);
    p.peer_pid = s.peer_pid;
    p.read_peer = s.read_peer;
    p.peer_reads = s.peer_reads;
  }
  peers_[params_.rank].rank = params_.rank;
  // A peer without a segment is on another host (a group that mixes transports): its
  // operations fail at once, as over a connection that failed, and another path carries it.
  for (int r = 0; r < params_.size; ++r) {
    Peer& p = peers_[static_cast<std::size_t>(r)];
    if (r == params_.rank || p.fd >= 0) continue;
    p.rank = r;
    p.failed = error(StatusCode::kUnavailable,
                     "rank " + std::to_string(r) + " is on another host: no shared memory with it");
  }
}

ShmLink::~ShmLink() {
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::close(p.fd);
  }
}

algorithms::Link::Handle ShmLink::send(int peer, algorithms::Tag tag,
                                       std::span<const std::byte> data) {
  return send_stamped(peer, tag, data, 0);
}

std::uint64_t ShmLink::stamp(Handle handle) const { return ops_[ops_.index_of(handle)].stamp; }

void ShmLink::report_early(int peer, std::vector<algorithms::EarlyArrival>& out) {
  TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "bad peer " << peer;
  report_early_messages(peers_[peer].arrived, out);
}

algorithms::Link::Handle ShmLink::send_stamped(int peer, algorithms::Tag tag,
                                               std::span<const std::byte> data,
                                               std::uint64_t stamp) {
  TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "no peer " << peer;
  const std::uint32_t i =
      ops_.alloc(true, peer, tag, const_cast<std::byte*>(data.data()), data.size());
  Op& op = ops_[i];
  Peer& p = peers_[peer];
  op.single_copy = p.peer_reads && params_.single_copy_bytes > 0 &&
                   data.size() >= params_.single_copy_bytes;
  op.header = RingHeader{tag.seq, tag.slot, tag.check, data.size(),
                         op.single_copy ? RingHeader::kSingleCopy : RingHeader::kData,
                         RingHeader::kMagic, stamp};
  // The token is the send's own handle: unique while the send is alive, and checked
  // against its generation when the ack comes.
  op.body = SingleCopyBody{reinterpret_cast<std::uintptr_t>(data.data()), ops_.handle_of(i)};
  std::lock_guard io(io_mu_);
  if (ops_.queue_send(i, p, abort_)) push(p);
  return ops_.handle_of(i);
}

algorithms::Link::Handle ShmLink::recv(int peer, algorithms::Tag tag, std::span<std::byte> data) {
  return receive(peer, tag, data, std::nullopt);
}

algorithms::Link::Handle ShmLink::recv_combine(int peer, algorithms::Tag tag,
                                               std::span<std::byte> data,
                                               const algorithms::Combine& c) {
  TRIB_CHECK(data.size() % dtype_size(c.dtype) == 0) << "partial element";
  return receive(peer, tag, data, c);
}

algorithms::Link::Handle ShmLink::receive(int peer, algorithms::Tag tag, std::span<std::byte> data,
                                          const std::optional<algorithms::Combine>& combine) {
  TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "bad peer " << peer;
  const std::uint32_t i = ops_.alloc(false, peer, tag, data.data(), data.size());
  ops_[i].combine = combine;
  std::lock_guard io(io_mu_);
  post_recv(i);
  return ops_.handle_of(i);
}

void ShmLink::post_recv(std::uint32_t i) {
  Op& op = ops_[i];
  op.single_copy = false;
  Peer& p = peers_[op.peer];
  const auto match = match_early(p, ops_, i, abort_);
  if (match == p.arrived.end()) return;
  op.stamp = match->stamp;
  if (match->single_copy) {
    const EarlyMessage m = std::move(*match);
    p.arrived.erase(match);
    return deliver_single_copy(p, i, m.remote, m.token, m.length);
  }
  Status st = fits(op, match->length, match->tag.check)
                  ? Status()
                  : match_status(peer_name(p), op, match->length, match->tag.check);
  const std::uint64_t have = match->complete ? match->length : match->length - p.remaining;
  if (st.is_ok() && op.combine) {
    // An incomplete one is the message in progress, whose rest the peer's cursor takes
    // from the ring; a complete one may arrive while another is in progress.
    CombineCursor local;
    CombineCursor& cursor = match->complete ? local : p.combining;
    cursor.start(*op.combine, op.data);
    cursor.feed(match->bytes.get(), have);
  } else if (st.is_ok() && have > 0) {
    std::memcpy(op.data, match->bytes.get(), have);
  }
  take_early(p, ops_, pool_, match, i, std::move(st));
}

Status ShmLink::wait(Handle handle, Deadline deadline) {
  const std::uint32_t i = ops_.index_of(handle);
  auto time_out = [&] {
    Peer& peer = peers_[ops_[i].peer];
    if (const auto it = peer.awaiting.find(ops_[i].body.token);
        ops_[i].is_send && ops_[i].single_copy && it != peer.awaiting.end()) {
      // Written, not yet read: the peer may still read the caller's buffer (a failed
      // collective's), the ack that may follow finds nothing.
      peer.awaiting.erase(it);
      Status st = timed_out(peer_name(peer), ops_[i]);
      ops_.free(i);
      return st;
    }
    return ops_.time_out(i, peer, peer.head_written > 0, Inbound::kDirect, Inbound::kDiscard,
                         peer_name(peer));
  };
  return wait_polling(
      ops_, i, deadline, params_.busy_poll, abort_, io_mu_, [&] { return progress(); }, time_out,
      [&] { return read_early(); },  // acks to send: back to the rings
      [&](TimePoint until) { sleep(until); });
}

bool ShmLink::test(Handle handle) { return ops_[ops_.index_of(handle)].done || abort_.raised(); }

bool ShmLink::look() {
  std::lock_guard io(io_mu_);
  return !abort_.raised() && progress();
}

void ShmLink::drive(Deadline until) {
  if (look() || abort_.raised()) return;
  // A look without blocking (a failover link polling) reads the rings only: a system call
  // per look would make its polling cost more than the message. A blocking drive sleeps,
  // and looks at the connections: a dead peer is seen there.
  if (until.passed() || read_early()) return;
  sleep(until.at);
}

bool ShmLink::read_early() {
  std::lock_guard io(io_mu_);
  return !abort_.raised() && read_early_single_copies();
}

void ShmLink::abort(const Status& reason) {
  abort_stream_link(abort_, io_mu_, peers_, reason, [this](const Status& r) { notify_peers(r); });
}

Result<std::unique_ptr<algorithms::Link>> make_shm_link(ShmLinkParams params,
                                                        std::vector<ShmPeer> peers) {
  Status st;
  for (const ShmPeer& p : peers) {
    const int flags = ::fcntl(p.fd, F_GETFL);
    if (st.is_ok() && (flags < 0 || ::fcntl(p.fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
      st = error(StatusCode::kInternal, "cannot make the connection to rank " +
                                            std::to_string(p.rank) +
                                            " non-blocking: " + std::strerror(errno));
    }
  }
  return make_stream_link<ShmLink>(st, std::move(params), std::move(peers));
}

}  // namespace tributary::transport
