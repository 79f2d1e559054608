// ShmLink, the Link behind make_shm_link (shm_link.h), shared by its two halves: the
// Link operations and their bookkeeping (shm_link.cc) and the progress engine that moves
// bytes between rings and buffers and sleeps (shm_link_progress.cc). Internal.
//
// Threading: one thread issues operations and drives the rings inside wait(); abort()
// may come from any thread. io_mu_ is held around every touch of a ring or of a caller
// buffer, so abort() can wait them out.
#pragma once

#include <poll.h>

#include <array>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "algorithms/pollable_link.h"
#include "core/check.h"
#include "transport/combine_cursor.h"
#include "transport/link_ops.h"
#include "transport/shm_link.h"
#include "transport/stream_inbound.h"

namespace tributary::transport {

// What precedes every payload in a ring. Same host, so native byte order.
struct RingHeader {
  static constexpr std::uint32_t kMagic = 0x4d485354;  // "TSHM"
  static constexpr std::uint32_t kData = 0;
  static constexpr std::uint32_t kNotice = 1;      // payload: code, origin, reason
  static constexpr std::uint32_t kSingleCopy = 2;  // `length` bytes to read from the sender;
                                                   // the ring carries a SingleCopyBody
  static constexpr std::uint32_t kAck = 3;         // single copy `seq` read: no payload
  std::uint64_t seq = 0;
  std::uint32_t slot = 0;
  std::uint32_t check = 0;
  std::uint64_t length = 0;
  std::uint32_t kind = kData;
  std::uint32_t magic = kMagic;
  std::uint64_t stamp = 0;  // the sender's (PollableLink::send_stamped)
};
static_assert(sizeof(RingHeader) == 40);

// Where a single-copy message lies in the sender, and the token its ack names.
struct SingleCopyBody {
  std::uint64_t address = 0;
  std::uint64_t token = 0;
};
static_assert(sizeof(SingleCopyBody) == 16);

class ShmLink final : public algorithms::PollableLink {
 public:
  // Takes ownership of the peers' connections and of `wake_fd` (AbortState's eventfd).
  ShmLink(ShmLinkParams params, std::vector<ShmPeer> peers, int wake_fd);
  ~ShmLink() override;

  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override;
  // The stamp rides in the ring header.
  bool carries_stamps() const override { return true; }
  Handle send_stamped(int peer, algorithms::Tag tag, std::span<const std::byte> data,
                      std::uint64_t stamp) override;
  std::uint64_t stamp(Handle handle) const override;
  void report_early(int peer, std::vector<algorithms::EarlyArrival>& out) override;
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override;
  // Reduces straight out of the peer's ring into the destination: the payload is read
  // once, by the reduction, instead of copied out and read again.
  bool combines() const override { return params_.combine; }
  Handle recv_combine(int peer, algorithms::Tag tag, std::span<std::byte> data,
                      const algorithms::Combine& c) override;
  Status wait(Handle handle, Deadline deadline) override;
  void abort(const Status& reason) override;
  bool test(Handle handle) override;
  void drive(Deadline until) override;
  bool look() override;
  bool polls_best() const override { return true; }
  int rank() const override { return params_.rank; }
  int size() const override { return params_.size; }

 private:
  struct Op : PendingOp {
    RingHeader header;
    // A single-copy send: the ring carries `body` instead of the payload, and the send
    // completes when the receiver acknowledges that it has read the caller's buffer.
    bool single_copy = false;
    SingleCopyBody body;
    // What goes into the ring after the header.
    std::size_t ring_bytes() const { return single_copy ? sizeof(body) : size; }
    const std::byte* ring_data() const {
      return single_copy ? reinterpret_cast<const std::byte*>(&body) : data;
    }
  };

  struct Peer : StreamPeer<RingHeader> {
    ShmSegment segment;
    ShmRing out;
    ShmRing in;
    CombineCursor combining;  // state kDirect into a combining receive
    bool self_is_low = false;
    // Single copy (cross_memory.h).
    pid_t peer_pid = 0;
    bool read_peer = false;   // descriptors from the peer are read from its memory
    bool peer_reads = false;  // large sends to the peer go single-copy
    std::unordered_map<std::uint64_t, Handle> awaiting;  // token -> send awaiting its ack
    SingleCopyBody incoming;  // the descriptor body arriving (state kSingleCopy)
    algorithms::Tag incoming_tag;
    std::uint64_t incoming_length = 0;
    std::uint64_t incoming_stamp = 0;
  };

  // ---- operations (shm_link.cc) ----
  std::string peer_name(const Peer& p) const {
    return "rank " + std::to_string(p.rank) + " (shm, " + p.address + ")";
  }

  // ---- progress (shm_link_progress.cc; caller's thread, io_mu_ held) ----
  // One pass over every peer: copies sends in, arrivals out. True when bytes moved.
  bool progress();
  bool push(Peer& p);
  bool pull(Peer& p);
  // pull() for a payload that a combining receive takes: reduced out of the ring.
  std::size_t pull_combining(Peer& p);
  // recv and recv_combine: allocates the receive and posts it.
  Handle receive(int peer, algorithms::Tag tag, std::span<std::byte> data,
                 const std::optional<algorithms::Combine>& combine);
  // Posts receive `i` (allocated, recv or recv_combine): takes a message that arrived
  // early, or waits in the peer's posted list.
  void post_recv(std::uint32_t i);
  // Single copy: a whole descriptor arrived; deliver it to its posted receive, or keep it.
  void take_single_copy(Peer& p);
  // Reads (or combines) the message at `remote` in the peer into receive `i`, finishes
  // it, and acknowledges `token`.
  void deliver_single_copy(Peer& p, std::uint32_t i, std::uint64_t remote, std::uint64_t token,
                           std::uint64_t length);
  // Reads every single-copy message that arrived before its receive into a buffer of this
  // side's, as the ring's early messages are, and acknowledges it. True when it read any.
  // Called before this side sleeps: the sender's send is not complete until the message
  // is read, so two ranks that each wait for their sends before posting their receives (a
  // send window full of single-copy sends, both ways) would otherwise wait on each other
  // until their deadlines.
  bool read_early_single_copies();
  // The same, taking io_mu_ (wait() and drive(), before they sleep).
  bool read_early();
  // An ack arrived: its send is complete.
  void take_ack(Peer& p, std::uint64_t token);
  // Queues a header-only message (an ack) to the peer, freed once written.
  void queue_control(Peer& p, const RingHeader& h);
  void begin_payload(Peer& p);
  void end_payload(Peer& p);
  // An abort notice arrived whole: the peer's operations fail with its status.
  void take_notice(Peer& p);
  void doorbell(Peer& p);
  // Raises the sleeping flags, re-checks, and sleeps in poll(2) until a doorbell, a
  // connection event, abort() or `until`. Takes io_mu_ itself.
  void sleep(TimePoint until);
  // Reads doorbell bytes; EOF or an error means the peer is gone.
  void drain_connection(Peer& p);
  void notify_peers(const Status& reason);
  void fail_peer(Peer& p, Status st, bool always_log);

  ShmLinkParams params_;
  std::vector<Peer> peers_;  // by rank
  AbortState abort_;
  OpTable<Op> ops_;
  PayloadPool pool_;
  std::vector<pollfd> pollfds_;
  std::vector<Peer*> poll_peers_;
  std::vector<StreamNotice> received_;  // notices received, relayed as they came (encode_notice)
  std::unique_ptr<std::byte[]> bounce_;  // single-copy reads a combining receive reduces

  // Held around every touch of a ring or caller buffer, so abort() can wait them out.
  std::mutex io_mu_;
};

}  // namespace tributary::transport
