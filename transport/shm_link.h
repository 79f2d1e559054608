// The Link of one epoch over shared-memory rings, for peers on the same host (built by
// ShmTransport; tests may build one directly).
//
// Guarantees, on top of algorithms/link.h:
// - Per peer, one segment (shm_segment.h) with a ring per direction. A message is a
//   32-byte header and its payload, streamed through the ring in pieces of at most
//   kPieceBytes, so a message of any size (up to max_frame_bytes) moves through a ring
//   of any size, and the receiver copies out while the sender still copies in.
// - No thread of its own: the thread in wait() copies every peer's queued sends in and
//   every peer's arriving bytes out; a payload whose recv is posted goes straight into
//   the caller's buffer, one that arrives first is buffered and copied once when matched.
// - Waits spin for `busy_poll`, then raise the rings' sleeping flags and sleep in poll(2)
//   on every peer's TCP connection and an eventfd; a peer that publishes into a ring
//   whose reader sleeps (or frees space a writer waits for) sends one doorbell byte on
//   that connection. The connection is also the peer's pulse: when the peer process
//   dies the kernel closes it and the sleeper wakes at once; whatever the peer put in
//   the ring before that is still delivered, later operations on it fail with
//   kPeerLost naming the rank. A peer that is alive but silent runs into the caller's
//   deadline (kTimedOut), as over TCP.
// - A header that does not parse (a corrupted segment) fails that peer with kBadFrame.
// - abort(): as TcpLink (transport/tcp/tcp_link.h): an error reason is first written to every
//   peer's ring as an abort notice when it fits without blocking, the connections are
//   shut down, and abort() returns only once no caller buffer is being touched.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/link.h"
#include "core/log.h"
#include "transport/link_ops.h"
#include "transport/shm_segment.h"

namespace tributary::transport {

// Bytes moved per peer rank: bumped by the link's thread (relaxed), read by anyone.
class TrafficCounters {
 public:
  explicit TrafficCounters(int size) : bytes_(2 * static_cast<std::size_t>(size)) {}
  void add_sent(int rank, std::uint64_t n) { at(rank, 0).fetch_add(n, std::memory_order_relaxed); }
  void add_received(int rank, std::uint64_t n) {
    at(rank, 1).fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t sent(int rank) const { return at(rank, 0).load(std::memory_order_relaxed); }
  std::uint64_t received(int rank) const { return at(rank, 1).load(std::memory_order_relaxed); }
  int size() const { return static_cast<int>(bytes_.size() / 2); }

 private:
  std::atomic<std::uint64_t>& at(int rank, int which) {
    return bytes_[2 * static_cast<std::size_t>(rank) + static_cast<std::size_t>(which)];
  }
  const std::atomic<std::uint64_t>& at(int rank, int which) const {
    return bytes_[2 * static_cast<std::size_t>(rank) + static_cast<std::size_t>(which)];
  }
  std::vector<std::atomic<std::uint64_t>> bytes_;
};

struct ShmPeer {
  int rank = -1;
  int fd = -1;  // the pair's authenticated TCP connection: doorbell and pulse; owned
  std::string address;
  ShmSegment segment;
  // Single-copy messages (cross_memory.h), as the pair's setup found them possible.
  pid_t peer_pid = 0;
  bool read_peer = false;   // this side may read the peer's buffers
  bool peer_reads = false;  // the peer reads this side's: large sends go single-copy
};

struct ShmLinkParams : StreamLinkParams {
  std::shared_ptr<TrafficCounters> counters;  // required
  // Sends this large or larger go single-copy to a peer that reads (0: never).
  std::uint64_t single_copy_bytes = std::uint64_t{64} << 10;
};

inline constexpr std::size_t kPieceBytes = 256 * 1024;
// Where single copy is on, messages this large or larger take it: below, the ack's round
// trip costs more than the copy it saves.
inline constexpr std::uint64_t kSingleCopyBytes = std::uint64_t{64} << 10;

// Takes ownership of the connections (closed on failure too). `peers`: every peer on this
// host (in a group that mixes transports, not every rank: the others' operations fail at
// once with kUnavailable). kInternal when the OS refuses an eventfd or a socket option.
Result<std::unique_ptr<algorithms::Link>> make_shm_link(ShmLinkParams params,
                                                        std::vector<ShmPeer> peers);

}  // namespace tributary::transport
