// The Link of one epoch over already-authenticated TCP sockets (built by TcpEndpoint;
// not meant to be constructed elsewhere except by tests of the endpoint).
//
// Guarantees, on top of link.h:
// - No I/O thread: the thread that calls wait() drives every socket of the link (reads
//   into posted buffers, buffers unexpected messages, flushes queued sends) with poll(2),
//   so a message exchange needs no thread hand-off. send() writes eagerly when the
//   socket has room.
// - Zero-copy where possible: a payload whose recv is already posted is read straight
//   into the caller's buffer; header and payload leave in one sendmsg. A message that
//   arrives before its recv is buffered and copied once when matched.
// - Failures are per peer: a reset, an EOF or a malformed frame on one connection fails
//   the pending and future operations on that peer only (kPeerLost / kBadFrame, naming
//   the rank and address) and closes that connection; the other peers carry on.
//   Frames of another epoch are counted and dropped, never delivered.
// - Every frame's CRC-32Cs (frame.h) are checked: a corrupted header before its fields are
//   believed, a corrupted payload before the operation completes. Either fails that peer
//   like a malformed frame (kBadFrame, "... fails its CRC-32C check", logged with both
//   ranks, counted in crc_failures): the caller never gets corrupted bytes as a result.
// - Unexpected messages (arrived before their recv) are held up to max_unexpected_bytes
//   per peer. A frame that would go beyond it is left unread, and so is everything behind
//   it on that connection, until a recv takes some: TCP's flow control then holds the
//   sender back, and a peer cannot make this process hold more than the bound.
// - When wait() returns (any status) the link never touches that operation's buffer
//   again: a half-sent message is finished from a private copy so the stream stays valid.
// - abort() wakes a blocked wait() through an eventfd, shuts the sockets down so peers
//   learn at once, and returns only once no caller buffer is being touched. When the
//   reason is an error (not kAborted), it first sends every connected peer an abort
//   notice (frame.h), best effort and without blocking: their operations on this rank
//   then fail with the same code and "rank R aborted: <reason>" rather than kPeerLost.
// - A connection closed while nothing is pending on it (a peer leaving at the end of a
//   run) is not logged; operations posted on it later still fail naming the peer.
// - A peer whose PeerSocket carries a TLS stream (transport/tcp/tls_stream.h, set up by the
//   endpoint) has every byte go through it, with the same guarantees: a record that fails
//   its authentication fails that peer like a bad frame. Other peers pay one branch.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/link.h"
#include "core/log.h"
#include "transport/link_ops.h"

namespace tributary::transport {

class TlsStream;

// Counters shared between a link (which bumps them on its own thread) and whoever reads
// metrics; relaxed atomics, monotonic.
struct LinkCounters {
  struct Peer {
    std::atomic<std::uint64_t> bytes_sent{0};
    std::atomic<std::uint64_t> bytes_received{0};
    std::atomic<std::uint64_t> frames_sent{0};
    std::atomic<std::uint64_t> frames_received{0};
  };
  explicit LinkCounters(int size) : peers(static_cast<std::size_t>(size)) {}
  std::vector<Peer> peers;  // by rank
  std::atomic<std::uint64_t> frames_dropped_stale_epoch{0};
  std::atomic<std::uint64_t> bad_frames{0};  // malformed or corrupted, CRC failures included
  std::atomic<std::uint64_t> crc_failures{0};
  // Times a peer's connection was left unread because its unexpected messages were at
  // the bound (TcpLinkParams::max_unexpected_bytes).
  std::atomic<std::uint64_t> unexpected_stalls{0};
  // Payload bytes that arrived before their recv was posted and were copied once more.
  std::atomic<std::uint64_t> bytes_copied_unexpected{0};
};

struct PeerSocket {
  int rank = -1;
  int fd = -1;  // connected, authenticated; the link takes ownership
  std::string address;
  std::shared_ptr<TlsStream> tls;  // established over fd, or null: plaintext
};

struct TcpLinkParams : transport::StreamLinkParams {
  // Per peer: payload bytes held for recvs not posted yet. A recv posted for a frame
  // stuck behind the bound (the sender sent other messages first that nobody asks for)
  // waits for its deadline.
  std::uint64_t max_unexpected_bytes = 256ull << 20;
  std::shared_ptr<LinkCounters> counters;  // required
  // While polling, give the core away after each look that found nothing (sched_yield):
  // where this host runs more of the group's ranks than it has cores, the peer a wait
  // waits for may need this very core; where each rank has a core of its own, a yield is
  // a system call for nothing.
  bool yield_while_spinning = true;
  // Set on each connection whose two ends are on this host, when it comes into the link
  // (transport/tcp/congestion.h); empty: every connection keeps the system's default.
  std::string same_host_congestion;
  // An error: the peers without a socket are not connected yet (a standby path that did
  // not connect, re-dialled in the background): their operations fail with it at once
  // until replace_peer_socket puts a connection in. OK: every peer has a socket.
  Status unconnected;
};

// For a path that reconnects (TcpEndpoint::reconnect): `socket` (non-blocking, its
// handshake done, of the link's epoch) carries the pair with socket.rank from now on. The
// old connection, if still open, is closed first (what is pending on it fails with
// kPeerLost); what arrived on it and was not taken is dropped: the bytes of the new
// connection start a fresh stream. The link's owner thread only. kInvalidArgument, with
// the socket closed, when `link` is not a TCP link or the rank is not a peer of it.
Status replace_peer_socket(algorithms::Link& link, PeerSocket socket);

// Takes ownership of the sockets (closed on failure too). kInternal when the OS refuses
// the link an eventfd.
Result<std::unique_ptr<algorithms::Link>> make_tcp_link(TcpLinkParams params,
                                                        std::vector<PeerSocket> peers);

}  // namespace tributary::transport
