// The TcpLink behind make_tcp_link (tcp_link.h), shared by its two halves: the Link
// operations and their bookkeeping (tcp_link.cc) and the progress engine that moves
// frames between sockets and buffers (tcp_link_progress.cc). Internal to agent/.
//
// Threading: one thread issues operations and drives the sockets inside wait(); abort()
// may come from any thread. io_mu_ is held around every touch of a socket or of a caller
// buffer, so abort() can wait them out; everything else belongs to the owner thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <poll.h>
#include <sys/uio.h>

#include "transport/tcp/frame.h"
#include "transport/tcp/tcp_link.h"
#include "algorithms/pollable_link.h"
#include "core/check.h"
#include "transport/combine_cursor.h"
#include "transport/link_ops.h"

namespace tributary::transport {

class TcpLink final : public algorithms::PollableLink {
 public:
  // Takes ownership of the sockets and of `wake_fd` (an eventfd that abort() writes to).
  TcpLink(TcpLinkParams params, std::vector<PeerSocket> sockets, int wake_fd);
  ~TcpLink() override;

  int rank() const override { return params_.rank; }
  int size() const override { return params_.size; }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override;
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override;
  // The stamp rides in the frame header (transport/tcp/frame.h).
  bool carries_stamps() const override { return true; }
  Handle send_stamped(int peer, algorithms::Tag tag, std::span<const std::byte> data,
                      std::uint64_t stamp) override;
  std::uint64_t stamp(Handle handle) const override;
  void report_early(int peer, std::vector<algorithms::EarlyArrival>& out) override;
  // The payload is read into the peer's staging buffer (cache-sized), checksummed there
  // and reduced from there into the destination: one pass over the destination instead
  // of a write by the socket read, a read by the checksum and one by the reduction.
  bool combines() const override { return params_.combine; }
  Handle recv_combine(int peer, algorithms::Tag tag, std::span<std::byte> data,
                      const algorithms::Combine& c) override;
  Status wait(Handle handle, Deadline deadline) override;
  void abort(const Status& reason) override;
  bool test(Handle handle) override;
  void drive(Deadline until) override;
  // drive() with a passed deadline, minus its clock reading. It does not say whether it
  // moved bytes (answers false): a failover link's waits that kept polling while TCP looks
  // moved bytes, instead of sleeping in poll(2), slowed oversubscribed groups.
  bool look() override;

  // A new connection to socket.rank in place of its old one (replace_peer_socket).
  void replace_peer(PeerSocket socket);

  // Per-peer read buffer: small frames arrive here with their headers.
  static constexpr std::size_t kStagingBytes = 64 * 1024;
  // A frame at most this large (header included) leaves through TLS as one record.
  static constexpr std::size_t kTlsCoalesceBytes = 16 * 1024;

 private:
  enum class RecvState : std::uint8_t { kHeader, kDirect, kUnexpected, kDiscard, kAbortNotice };

  struct Op : transport::PendingOp {
    FrameHeaderBytes header{};
    // The payload's CRC-32C: a small payload's computed at send(), a large one's as its
    // bytes go out (crc so far), known once the last of them is written.
    FrameTrailerBytes trailer{};
    std::uint32_t crc = 0;
    bool trailer_ready = false;
  };

  struct Peer {
    int rank = -1;
    int fd = -1;
    std::string address;
    Status failed;
    LinkCounters::Peer* counters = nullptr;
    // Send side: ops in wire order; the head may be partly written.
    std::deque<std::uint32_t> sendq;
    std::size_t head_sent = 0;
    // Receive side.
    std::vector<std::uint32_t> posted;  // recvs in post order, none with a buffered match
    std::deque<transport::EarlyMessage> unexpected;  // arrival order; back() may still be arriving
    std::uint64_t unexpected_bytes = 0;              // their lengths, in total
    // The frame at stage_begin would take unexpected_bytes past the bound: nothing more
    // is read from this peer until a recv is posted or takes an unexpected message.
    bool stalled = false;
    RecvState state = RecvState::kHeader;
    FrameHeader frame;            // the frame whose payload is arriving
    std::uint32_t crc = 0;        // of its payload bytes so far
    std::byte* dst = nullptr;     // payload destination (nullptr: discard)
    std::uint64_t length = 0;     // current payload length
    std::uint64_t remaining = 0;  // of the current payload
    // The current payload's trailer (frame.h): bytes of it still to come, and those in.
    std::size_t trailer_left = 0;
    FrameTrailerBytes trailer{};
    std::uint32_t direct_op = 0;
    transport::CombineCursor combining;  // state kDirect into a combining receive
    std::unique_ptr<std::byte[]> staging;
    std::size_t stage_begin = 0;
    std::size_t stage_end = 0;
    bool logged_stale = false;
    std::vector<std::byte> notice;  // an abort notice's payload while it arrives
    // TLS (null: plaintext). A write that returned kWantWrite has bytes of the head frame
    // inside OpenSSL already: the head counts as started, and the next write offers the
    // same bytes again.
    std::shared_ptr<TlsStream> tls;
    bool tls_write_pending = false;
    std::unique_ptr<std::byte[]> tls_scratch;  // a small frame, header and payload together
  };

  // An abort notice received from a peer, as this link reported it (`status`), kept so
  // that aborting with that very status relays the notice instead of wrapping it again.
  struct ReceivedNotice {
    Status status;
    AbortNotice notice;
  };

  // ---- operations (tcp_link.cc) ----

  void check_peer(int peer) const {
    TRIB_CHECK(peer >= 0 && peer < params_.size && peer != params_.rank) << "bad peer " << peer;
  }
  std::string peer_name(const Peer& p) const {
    return "rank " + std::to_string(p.rank) + " at " + p.address;
  }
  // The caller's wait ran out: detach the op so its buffer is never touched again.
  Status time_out(std::uint32_t i);
  // recv and recv_combine: allocates the receive and posts it.
  Handle receive(int peer, algorithms::Tag tag, std::span<std::byte> data,
                 const std::optional<algorithms::Combine>& combine);
  // Posts receive `i` (recv or recv_combine): takes its message if it arrived early.
  void post_recv(std::uint32_t i);
  // The payload arriving now goes to a combining receive (through staging).
  bool combining(const Peer& p) const {
    return p.state == RecvState::kDirect && ops_[p.direct_op].combine.has_value();
  }

  // ---- the progress engine (tcp_link_progress.cc; caller's thread) ----

  // Polls every live socket for up to `timeout` and services what is ready.
  // `yield_when_idle`: a zero-timeout look that finds nothing gives the CPU away (the peer
  // may need this very core); not for a look at a link that is not the one waited on.
  // True when a socket was ready (bytes moved or a failure was seen), false when the poll
  // timed out or was interrupted.
  bool progress(Duration timeout, Deadline deadline, bool yield_when_idle = true);
  void flush(Peer& p);
  void pump_read(Peer& p);
  // readv(2), or the same through TLS (drained until OpenSSL wants the socket). Bytes
  // read, 0 when the peer closed, -1 with errno (EAGAIN: nothing now), -2 a TLS failure
  // (p.tls->error()). *drained: nothing more can be read before poll(2) says so.
  ssize_t read_some(Peer& p, const iovec* iov, int cnt, bool* drained);
  // flush() through TLS: the head frame in one record when small, else header then
  // payload straight from the caller's buffer.
  void flush_tls(Peer& p);
  // The bytes of the head frame from offset `sent` that one TLS write offers.
  std::span<const std::byte> tls_segment(Peer& p, std::size_t sent);
  // Counts `n` bytes of the queue as sent, finishing the frames they complete (and the
  // CRC-32C of a large payload, over the bytes just written while they are in cache).
  void account_sent(Peer& p, std::size_t n);
  // The iovecs of `op`'s frame from byte `skip` on, appended at iov[cnt] (room for 3).
  // False when the trailer is not known yet: nothing after the payload may go in this write.
  static bool frame_iov(Op& op, std::size_t skip, iovec* iov, int& cnt);
  static std::size_t frame_bytes(const Op& op) {
    return kFrameHeaderBytes + frame_body_bytes(op.size);
  }
  // Finishes `op`'s CRC over its payload from byte `from` on.
  static void finish_crc(Op& op, std::size_t from);
  // Parses headers and moves payload bytes out of the staging buffer.
  void consume_staging(Peer& p);
  // False when the frame has to wait (the unexpected bound): it stays unread.
  bool begin_payload(Peer& p, const FrameHeader& h);
  // The frame's payload and trailer are in: deliver it (or fail it on a CRC mismatch).
  void end_payload(Peer& p);
  // The payload that just ended fails its CRC: fail its operation and the peer.
  void fail_corrupt(Peer& p, RecvState state);
  // A recv was posted on `p` or took one of its unexpected messages: read on.
  void resume(Peer& p);
  // Best effort, never blocking: tells every connected peer why this link gives up, so
  // their pending operations fail with the same code and reason. A peer whose stream is
  // in the middle of a frame gets the notice only if that frame can be finished at once.
  void notify_peers(const Status& reason);
  // One non-blocking attempt to write the rest of a half-sent frame.
  bool finish_head_frame(Peer& p);
  // A socket call failed with errno `err`: the connection to `p` is lost.
  void fail_peer_os(Peer& p, int err);
  // Closes the connection and fails everything pending on it. Messages that arrived
  // whole before the failure stay deliverable. A connection closed while nothing was
  // pending on it (a peer leaving at the end of a run) is not worth a log line; later
  // operations on it still fail with `st`.
  void fail_peer(Peer& p, Status st, bool always_log);

  TcpLinkParams params_;
  std::vector<Peer> peers_;  // by rank; peers_[rank()] unused
  transport::AbortState abort_;

  // Owner thread only (guarded additionally by io_mu_ where abort() can race).
  transport::OpTable<Op> ops_;
  transport::PayloadPool pool_;
  std::vector<ReceivedNotice> received_notices_;
  std::vector<pollfd> pollfds_;
  std::vector<Peer*> poll_peers_;
  bool any_tls_ = false;  // some peer's bytes go through TLS

  // Held around every touch of a socket or caller buffer, so abort() can wait them out.
  std::mutex io_mu_;
};

}  // namespace tributary::transport
