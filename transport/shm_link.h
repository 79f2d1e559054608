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
// - abort(): as TcpLink (agent/tcp_link.h): an error reason is first written to every
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
#include "transport/shm_segment.h"

namespace tributary::transport {

// Bytes moved, per peer rank; relaxed atomics bumped by the link's thread.
struct TrafficCounters {
  struct Peer {
    std::atomic<std::uint64_t> bytes_sent{0};
    std::atomic<std::uint64_t> bytes_received{0};
  };
  explicit TrafficCounters(int size) : peers(static_cast<std::size_t>(size)) {}
  std::vector<Peer> peers;
};

struct ShmPeer {
  int rank = -1;
  int fd = -1;  // the pair's authenticated TCP connection: doorbell and pulse; owned
  std::string address;
  ShmSegment segment;
};

struct ShmLinkParams {
  std::uint64_t epoch = 0;
  int rank = 0;
  int size = 1;
  std::uint64_t max_frame_bytes = 1ull << 30;
  Duration busy_poll = std::chrono::microseconds(50);
  Logger log{"link"};
  std::shared_ptr<TrafficCounters> counters;  // required
};

inline constexpr std::size_t kPieceBytes = 256 * 1024;

// Takes ownership of the connections (closed on failure too). kInternal when the OS
// refuses an eventfd or a socket option.
Result<std::unique_ptr<algorithms::Link>> make_shm_link(ShmLinkParams params,
                                                        std::vector<ShmPeer> peers);

}  // namespace tributary::transport
