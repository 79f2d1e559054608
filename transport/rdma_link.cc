// The RdmaLink's operations: posting sends and receives, waiting, aborting. The bytes
// move in rdma_link_progress.cc.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transport/polling_wait.h"
#include "transport/rdma_link_impl.h"

namespace tributary::transport {
Status post_initial_receives(VerbsGroup& group, int peer, const RdmaSlots& slots) {
  for (std::uint32_t s = 0; s < slots.recv_slots; ++s) {
    TRIB_RETURN_IF_ERROR(group.post_recv(peer, s, wr_id_of(true, peer, s)));
  }
  return Status();
}

RdmaLink::RdmaLink(RdmaLinkParams params, std::unique_ptr<VerbsGroup> group,
                   std::vector<RdmaPeer> peers, int wake_fd)
    : params_(std::move(params)),
      group_(std::move(group)),
      peers_(static_cast<std::size_t>(params_.size)),
      owed_threshold_(std::max<std::uint32_t>(1, params_.slots.recv_slots / 2)),
      abort_(wake_fd) {
  TRIB_CHECK(params_.counters != nullptr && params_.counters->size() == params_.size);
  TRIB_CHECK(params_.rank >= 0 && params_.rank < params_.size);
  TRIB_CHECK(group_ != nullptr);
  TRIB_CHECK(params_.slots.recv_slots >= 4 && params_.slots.send_slots >= 1)
      << "rdma slots: " << params_.slots.recv_slots << " receive, " << params_.slots.send_slots
      << " send";
  TRIB_CHECK(peers.size() + 1 == peers_.size()) << "one queue pair per peer, not " << peers.size();
  for (RdmaPeer& s : peers) {
    TRIB_CHECK(s.rank >= 0 && s.rank < params_.size && s.rank != params_.rank && s.fd >= 0 &&
               peers_[s.rank].fd < 0)
        << "bad or repeated rdma peer " << s.rank;
    TRIB_CHECK(s.peer_recv_slots >= 2 && s.chunk_bytes > sizeof(ChunkPrefix) &&
               s.chunk_bytes <= params_.slots.slot_bytes)
        << "rdma peer " << s.rank << ": " << s.peer_recv_slots << " credits, chunks of "
        << s.chunk_bytes;
    Peer& p = peers_[s.rank];
    p.rank = s.rank;
    p.fd = s.fd;
    p.address = std::move(s.address);
    p.credits = p.credit_limit = s.peer_recv_slots;
    p.chunk_bytes = s.chunk_bytes;
    for (std::uint32_t k = params_.slots.send_slots; k-- > 0;) p.free_send.push_back(k);
  }
  peers_[params_.rank].rank = params_.rank;
  completions_.resize(64);
}

RdmaLink::~RdmaLink() {
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::close(p.fd);
  }
  group_.reset();  // the queue pairs go before anything they could write into
}

algorithms::Link::Handle RdmaLink::send(int peer, algorithms::Tag tag,
                                        std::span<const std::byte> data) {
  TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "no peer " << peer;
  const std::uint32_t i =
      ops_.alloc(true, peer, tag, const_cast<std::byte*>(data.data()), data.size());
  Op& op = ops_[i];
  op.header = RdmaHeader{tag.seq, tag.slot, tag.check, data.size(), 0, RdmaHeader::kMagic};
  std::lock_guard io(io_mu_);
  if (Peer& p = peers_[peer]; ops_.queue_send(i, p, abort_)) push(p);
  return ops_.handle_of(i);
}

algorithms::Link::Handle RdmaLink::recv(int peer, algorithms::Tag tag, std::span<std::byte> data) {
  TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "bad peer " << peer;
  const std::uint32_t i = ops_.alloc(false, peer, tag, data.data(), data.size());
  Op& op = ops_[i];
  std::lock_guard io(io_mu_);
  Peer& p = peers_[peer];
  const auto match = match_early(p, ops_, i, abort_);
  if (match == p.arrived.end()) return ops_.handle_of(i);
  Status st = fits(op, match->length, match->tag.check)
                  ? Status()
                  : match_status(peer_name(p), op, match->length, match->tag.check);
  const std::uint64_t have = match->complete ? match->length : match->length - p.remaining;
  if (st.is_ok() && have > 0) std::memcpy(op.data, match->bytes.get(), have);
  take_early(p, ops_, pool_, match, i, std::move(st));
  return ops_.handle_of(i);
}

Status RdmaLink::wait(Handle handle, Deadline deadline) {
  const std::uint32_t i = ops_.index_of(handle);
  return wait_polling(
      ops_, i, deadline, params_.busy_poll, abort_, io_mu_, [&] { return progress(); },
      [&] {
        Peer& peer = peers_[ops_[i].peer];
        return ops_.time_out(i, peer, peer.head_written > 0, Inbound::kDirect, Inbound::kDiscard,
                             peer_name(peer));
      },
      [] { return false; }, [&](TimePoint until) { sleep(until); });
}

bool RdmaLink::test(Handle handle) { return ops_[ops_.index_of(handle)].done || abort_.raised(); }

bool RdmaLink::look() {
  std::lock_guard io(io_mu_);
  return !abort_.raised() && progress();
}

void RdmaLink::drive(Deadline until) {
  if (look() || abort_.raised()) return;
  if (until.passed()) return;
  sleep(until.at);
}

void RdmaLink::abort(const Status& reason) {
  abort_stream_link(abort_, io_mu_, peers_, reason, [this](const Status& r) {
    notify_peers(r);
    settle(std::chrono::milliseconds(100));
  });
}

Result<std::unique_ptr<algorithms::Link>> make_rdma_link(RdmaLinkParams params,
                                                         std::unique_ptr<VerbsGroup> group,
                                                         std::vector<RdmaPeer> peers) {
  Status st = group != nullptr ? Status() : error(StatusCode::kInternal, "no verbs group");
  for (const RdmaPeer& p : peers) {
    const int flags = ::fcntl(p.fd, F_GETFL);
    if (st.is_ok() && (flags < 0 || ::fcntl(p.fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
      st = error(StatusCode::kInternal, "cannot make the connection to rank " +
                                            std::to_string(p.rank) +
                                            " non-blocking: " + std::strerror(errno));
    }
  }
  Result<int> wake_fd = st.is_ok() ? make_wake_fd() : Result<int>(st);
  if (!wake_fd.is_ok()) {
    for (const RdmaPeer& p : peers) ::close(p.fd);
    return wake_fd.status();
  }
  return std::unique_ptr<algorithms::Link>(
      std::make_unique<RdmaLink>(std::move(params), std::move(group), std::move(peers), *wake_fd));
}

}  // namespace tributary::transport
