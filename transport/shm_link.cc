// The ShmLink's operations: posting sends and receives, waiting, aborting, and the table
// of operations in flight. The bytes move in shm_link_progress.cc.
#include <fcntl.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transport/shm_link_impl.h"

namespace tributary::transport {
namespace {

// How often a waiter that keeps making progress still looks at the peers' connections,
// so that a dead peer is noticed even while others keep it busy.
constexpr auto kPulseInterval = std::chrono::milliseconds(1);

}  // namespace

ShmLink::ShmLink(ShmLinkParams params, std::vector<ShmPeer> peers, int wake_fd)
    : params_(std::move(params)),
      peers_(static_cast<std::size_t>(params_.size)),
      wake_fd_(wake_fd) {
  TRIB_CHECK(params_.counters != nullptr);
  TRIB_CHECK(params_.rank >= 0 && params_.rank < params_.size);
  for (int r = 0; r < params_.size; ++r) {
    peers_[r].rank = r;
    peers_[r].counters = &params_.counters->peers[static_cast<std::size_t>(r)];
  }
  for (ShmPeer& s : peers) {
    TRIB_CHECK(s.rank >= 0 && s.rank < params_.size && s.rank != params_.rank && s.fd >= 0)
        << "bad shared-memory peer " << s.rank;
    Peer& p = peers_[s.rank];
    TRIB_CHECK(p.fd < 0) << "two segments for rank " << s.rank;
    p.fd = s.fd;
    p.address = std::move(s.address);
    p.self_is_low = params_.rank < s.rank;
    p.segment = std::move(s.segment);
    p.out = p.segment.outgoing(p.self_is_low);
    p.in = p.segment.incoming(p.self_is_low);
  }
  for (const Peer& p : peers_) {
    TRIB_CHECK(p.rank == params_.rank || p.fd >= 0) << "no segment for rank " << p.rank;
  }
}

ShmLink::~ShmLink() {
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::close(p.fd);
  }
  ::close(wake_fd_);
}

algorithms::Link::Handle ShmLink::send(int peer, algorithms::Tag tag,
                                       std::span<const std::byte> data) {
  TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "bad peer " << peer;
  const std::uint32_t i =
      alloc_op(true, peer, tag, const_cast<std::byte*>(data.data()), data.size());
  Op& op = ops_[i];
  op.header = RingHeader{tag.seq, tag.slot, tag.check, data.size(), 0, RingHeader::kMagic};
  std::lock_guard io(io_mu_);
  Peer& p = peers_[peer];
  if (aborted_.load(std::memory_order_acquire)) {
    finish(op, abort_status());
  } else if (!p.failed.is_ok()) {
    finish(op, p.failed);
  } else {
    p.sendq.push_back(i);
    if (p.sendq.size() == 1) push(p);
  }
  return handle_of(i);
}

algorithms::Link::Handle ShmLink::recv(int peer, algorithms::Tag tag, std::span<std::byte> data) {
  TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "bad peer " << peer;
  const std::uint32_t i = alloc_op(false, peer, tag, data.data(), data.size());
  Op& op = ops_[i];
  std::lock_guard io(io_mu_);
  Peer& p = peers_[peer];
  if (aborted_.load(std::memory_order_acquire)) {
    finish(op, abort_status());
    return handle_of(i);
  }
  auto match = std::find_if(p.arrived.begin(), p.arrived.end(),
                            [&](const Arrived& a) { return a.tag == tag; });
  if (match == p.arrived.end()) {
    if (!p.failed.is_ok()) {
      finish(op, p.failed);
    } else {
      p.posted.push_back(i);
    }
    return handle_of(i);
  }
  Status st = length_check(p, op, match->length, match->tag.check);
  const std::uint64_t have = match->complete ? match->length : match->length - p.remaining;
  if (st.is_ok() && have > 0) std::memcpy(op.data, match->bytes.get(), have);
  if (!match->complete) {
    // The rest of it is still in the ring: it goes to the caller's buffer (or nowhere).
    p.state = st.is_ok() ? Inbound::kDirect : Inbound::kDiscard;
    p.dst = st.is_ok() ? op.data : nullptr;
    p.direct_op = i;
  }
  if (match->complete || !st.is_ok()) finish(op, std::move(st));
  pool_.give_back(std::move(match->bytes));
  p.arrived.erase(match);
  return handle_of(i);
}

Status ShmLink::wait(Handle handle, Deadline deadline) {
  const std::uint32_t i = index_of(handle);
  TimePoint spin_until = std::chrono::steady_clock::now() + params_.busy_poll;
  TimePoint pulse_at = spin_until + kPulseInterval;
  for (;;) {
    bool moved;
    {
      std::lock_guard io(io_mu_);
      moved = !aborted_.load(std::memory_order_acquire) && progress();
    }
    if (ops_[i].done) return release(i);
    if (aborted_.load(std::memory_order_acquire)) {
      free_op(i);
      return abort_status();
    }
    const TimePoint now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) return time_out(i);
    if (moved) {
      spin_until = now + params_.busy_poll;
      if (now >= pulse_at) {
        sleep(now);  // no sleep: a look at the connections
        pulse_at = now + kPulseInterval;
      }
    } else if (now < spin_until) {
      sched_yield();  // when ranks outnumber cores the peer may need this very core
    } else {
      sleep(deadline.at);
      pulse_at = std::chrono::steady_clock::now() + kPulseInterval;
    }
  }
}

void ShmLink::abort(const Status& reason) {
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
  std::lock_guard io(io_mu_);
  if (first && !reason.is_ok() && reason.code() != StatusCode::kAborted) notify_peers(reason);
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
  }
}

Status ShmLink::abort_status() {
  std::lock_guard lock(abort_mu_);
  return abort_status_;
}

std::uint32_t ShmLink::alloc_op(bool is_send, int peer, algorithms::Tag tag, std::byte* data,
                                std::size_t size) {
  std::uint32_t i;
  if (free_ops_.empty()) {
    i = static_cast<std::uint32_t>(ops_.size());
    ops_.emplace_back();
  } else {
    i = free_ops_.back();
    free_ops_.pop_back();
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
  return i;
}

std::uint32_t ShmLink::index_of(Handle h) const {
  const auto low = static_cast<std::uint32_t>(h & 0xffffffffu);
  TRIB_CHECK(low >= 1 && low <= ops_.size()) << "unknown handle " << h;
  const std::uint32_t i = low - 1;
  TRIB_CHECK(ops_[i].in_use && !ops_[i].orphan && ops_[i].generation == (h >> 32))
      << "unknown or already waited handle " << h;
  return i;
}

Status ShmLink::release(std::uint32_t i) {
  Status st = std::move(ops_[i].status);
  free_op(i);
  return st;
}

void ShmLink::free_op(std::uint32_t i) {
  Op& op = ops_[i];
  op.in_use = false;
  op.owned.reset();
  ++op.generation;
  free_ops_.push_back(i);
}

Status ShmLink::length_check(const Peer& p, const Op& op, std::uint64_t length,
                             std::uint32_t check) const {
  if (length == op.size && check == op.tag.check) return Status();
  return error(StatusCode::kMismatch,
               peer_name(p) + " sent " + std::to_string(length) + " bytes (check " +
                   std::to_string(check) + ") for seq " + std::to_string(op.tag.seq) + " slot " +
                   std::to_string(op.tag.slot) + ", expected " + std::to_string(op.size) +
                   " (check " + std::to_string(op.tag.check) + ")");
}

Status ShmLink::time_out(std::uint32_t i) {
  std::lock_guard io(io_mu_);
  Op& op = ops_[i];
  Peer& p = peers_[op.peer];
  if (op.done) return release(i);
  if (op.is_send) {
    auto it = std::find(p.sendq.begin(), p.sendq.end(), i);
    if (it == p.sendq.begin() && p.head_written > 0) {
      // Half in the ring: finish from a private copy or the stream would desync.
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
  if (p.state == Inbound::kDirect && p.direct_op == i) {
    p.state = Inbound::kDiscard;
    p.dst = nullptr;
  }
  const algorithms::Tag tag = op.tag;
  free_op(i);
  return error(StatusCode::kTimedOut, "no message from " + peer_name(p) + " for seq " +
                                          std::to_string(tag.seq) + " slot " +
                                          std::to_string(tag.slot) + " before the deadline");
}

Result<std::unique_ptr<algorithms::Link>> make_shm_link(ShmLinkParams params,
                                                        std::vector<ShmPeer> peers) {
  auto close_all = [&] {
    for (const ShmPeer& p : peers) ::close(p.fd);
  };
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    close_all();
    return error(StatusCode::kInternal, std::string("eventfd: ") + std::strerror(err));
  }
  for (const ShmPeer& p : peers) {
    const int flags = ::fcntl(p.fd, F_GETFL);
    if (flags < 0 || ::fcntl(p.fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      const int err = errno;
      close_all();
      ::close(wake_fd);
      return error(StatusCode::kInternal, "cannot make the connection to rank " +
                                              std::to_string(p.rank) +
                                              " non-blocking: " + std::strerror(err));
    }
  }
  return std::unique_ptr<algorithms::Link>(
      std::make_unique<ShmLink>(std::move(params), std::move(peers), wake_fd));
}

}  // namespace tributary::transport
