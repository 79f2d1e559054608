// The TcpLink's operations: posting sends and receives, waiting, aborting, and the
// table of operations in flight. The bytes move in tcp_link_progress.cc.
#include "agent/tcp_link.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/tcp_link_impl.h"

namespace tributary::agent {

TcpLink::TcpLink(TcpLinkParams params, std::vector<PeerSocket> sockets, int wake_fd)
    : params_(std::move(params)),
      peers_(static_cast<std::size_t>(params_.size)),
      wake_fd_(wake_fd) {
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
}

TcpLink::~TcpLink() {
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::close(p.fd);
  }
  ::close(wake_fd_);
}

algorithms::Link::Handle TcpLink::send(int peer, algorithms::Tag tag,
                                       std::span<const std::byte> data) {
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

algorithms::Link::Handle TcpLink::recv(int peer, algorithms::Tag tag, std::span<std::byte> data) {
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
  pool_.give_back(std::move(u->bytes));
  p.unexpected.erase(u);
  return handle_of(i);
}

Status TcpLink::wait(Handle handle, Deadline deadline) {
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

void TcpLink::abort(const Status& reason) {
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

std::uint32_t TcpLink::alloc_op(bool is_send, int peer, algorithms::Tag tag, std::byte* data,
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

std::uint32_t TcpLink::index_of(Handle h) const {
  const auto low = static_cast<std::uint32_t>(h & 0xffffffffu);
  TRIB_CHECK(low >= 1 && low <= ops_.size()) << "unknown handle " << h;
  const std::uint32_t i = low - 1;
  TRIB_CHECK(ops_[i].in_use && !ops_[i].orphan && ops_[i].generation == (h >> 32))
      << "unknown or already waited handle " << h;
  return i;
}

Status TcpLink::release(std::uint32_t i) {
  Op& op = ops_[i];
  Status st = std::move(op.status);
  free_op(i);
  return st;
}

void TcpLink::free_op(std::uint32_t i) {
  Op& op = ops_[i];
  op.in_use = false;
  op.owned.reset();
  ++op.generation;
  free_ops_.push_back(i);
}

Status TcpLink::match_status(const Peer& p, const Op& op, std::uint64_t length,
                             std::uint32_t check) const {
  if (length == op.size && check == op.tag.check) return Status();
  return error(StatusCode::kMismatch,
               "rank " + std::to_string(p.rank) + " sent " + std::to_string(length) +
                   " bytes (check " + std::to_string(check) + ") for seq " +
                   std::to_string(op.tag.seq) + " slot " + std::to_string(op.tag.slot) +
                   ", expected " + std::to_string(op.size) + " (check " +
                   std::to_string(op.tag.check) + ")");
}

Status TcpLink::time_out(std::uint32_t i) {
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
    return error(StatusCode::kTimedOut, peer_name(p) + " did not take " + std::to_string(op.size) +
                                            " bytes before the deadline");
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

Result<std::unique_ptr<algorithms::Link>> make_tcp_link(TcpLinkParams params,
                                                        std::vector<PeerSocket> peers) {
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    for (const PeerSocket& p : peers) ::close(p.fd);
    return error(StatusCode::kInternal, std::string("eventfd: ") + std::strerror(err));
  }
  return std::unique_ptr<algorithms::Link>(
      std::make_unique<TcpLink>(std::move(params), std::move(peers), wake_fd));
}

}  // namespace tributary::agent
