// RdmaLink, the Link behind make_rdma_link (rdma_link.h), shared by its two halves: the
// Link operations and their bookkeeping (rdma_link.cc) and the progress engine that
// polls completions, packs and unpacks chunks, and sleeps (rdma_link_progress.cc).
// Internal.
//
// Threading: one thread issues operations and drives the queue pairs inside wait();
// abort() may come from any thread. io_mu_ is held around every call into the verbs
// group and every touch of a caller buffer, so abort() can wait them out.
#pragma once

#include <poll.h>

#include <deque>
#include <mutex>

#include "algorithms/pollable_link.h"
#include "core/check.h"
#include "transport/rdma_link.h"
#include "transport/stream_inbound.h"

namespace tributary::transport {

// What precedes every payload in the stream. Both ends are one build: native byte order.
struct RdmaHeader {
  static constexpr std::uint32_t kMagic = 0x4d445254;  // "TRDM"
  std::uint64_t seq = 0;
  std::uint32_t slot = 0;
  std::uint32_t check = 0;
  std::uint64_t length = 0;
  std::uint32_t kind = 0;  // 0: data; 1: abort notice (payload: code, origin, reason)
  std::uint32_t magic = kMagic;
};
static_assert(sizeof(RdmaHeader) == 32);

// The first bytes of every chunk (one RDMA send).
struct ChunkPrefix {
  std::uint32_t credits = 0;  // receive slots the sender reposted since its last report
  std::uint32_t bytes = 0;    // stream bytes after the prefix
};
static_assert(sizeof(ChunkPrefix) == 8);

// wr_id: bit 63 set for a receive, the peer's rank in bits 32..62, the slot below.
constexpr std::uint64_t kRecvBit = std::uint64_t{1} << 63;
inline std::uint64_t wr_id_of(bool recv, int peer, std::uint32_t slot) {
  return (recv ? kRecvBit : 0) | (static_cast<std::uint64_t>(peer) << 32) | slot;
}

class RdmaLink final : public algorithms::PollableLink {
 public:
  // Takes ownership of the peers' connections, of `group` and of `wake_fd`.
  RdmaLink(RdmaLinkParams params, std::unique_ptr<VerbsGroup> group, std::vector<RdmaPeer> peers,
           int wake_fd);
  ~RdmaLink() override;

  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override;
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override;
  Status wait(Handle handle, Deadline deadline) override;
  void abort(const Status& reason) override;
  bool test(Handle handle) override;
  void drive(Deadline until) override;
  bool look() override;
  int rank() const override { return params_.rank; }
  int size() const override { return params_.size; }

 private:
  struct Op : PendingOp {
    RdmaHeader header;
  };

  struct Peer : StreamPeer<RdmaHeader> {
    // Sending: what a chunk may carry.
    std::uint32_t credits = 0;        // receive slots free at the peer
    std::uint32_t credit_limit = 0;   // the peer's receive slots: credits never exceed it
    std::uint32_t owed = 0;           // own slots reposted, not yet reported to the peer
    std::uint32_t chunk_bytes = 0;
    std::vector<std::uint32_t> free_send;  // send slots whose completion came back
    std::uint32_t sends_in_flight = 0;
  };

  std::string peer_name(const Peer& p) const {
    return "rank " + std::to_string(p.rank) + " (rdma, " + p.address + ")";
  }

  // ---- progress (rdma_link_progress.cc; caller's thread, io_mu_ held) ----
  // Polls every completion, then sends what the credits allow. True when anything moved.
  bool progress();
  bool poll_completions();
  void on_completion(const VerbsCompletion& c);
  void on_chunk(Peer& p, std::uint32_t slot, std::uint32_t byte_len);
  // Packs and posts chunks while the credits and send slots allow.
  bool push(Peer& p);
  // Copies the send queue's next stream bytes into `out`; how many.
  std::size_t pack(Peer& p, std::span<std::byte> out);
  Status post_chunk(Peer& p, std::uint32_t slot, std::uint32_t stream_bytes);
  // Feeds one chunk's stream bytes to the peer's inbound state machine.
  void unpack(Peer& p, std::span<const std::byte> bytes);
  void begin_payload(Peer& p);
  void end_payload(Peer& p);
  void take_notice(Peer& p);
  // Arms the completion queue, re-checks, and sleeps in poll(2) until a completion, a
  // connection event, abort() or `until`. Takes io_mu_ itself.
  void sleep(TimePoint until);
  // Reads whatever the peer sent on its connection; EOF or an error means it is gone.
  void drain_connection(Peer& p);
  void notify_peers(const Status& reason);
  // Sends `stream` (whole, or not at all) to `p` now: true when posted.
  bool send_now(Peer& p, std::span<const std::byte> stream);
  // Waits up to `limit` for the sends in flight to complete (abort notices landing).
  void settle(Duration limit);
  void fail_peer(Peer& p, Status st, bool always_log);

  RdmaLinkParams params_;
  std::unique_ptr<VerbsGroup> group_;
  std::vector<Peer> peers_;  // by rank
  std::uint32_t owed_threshold_ = 1;
  AbortState abort_;
  OpTable<Op> ops_;
  PayloadPool pool_;
  std::vector<VerbsCompletion> completions_;
  std::vector<pollfd> pollfds_;
  std::vector<Peer*> poll_peers_;
  std::vector<StreamNotice> received_;  // notices received, relayed as they came (encode_notice)

  std::mutex io_mu_;
};

}  // namespace tributary::transport
