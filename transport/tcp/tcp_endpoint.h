// The TCP data plane of one agent process: a listening socket that lives across epochs,
// and, per epoch, a fully connected group of authenticated links (see tcp_link.h for
// what a link guarantees on the hot path).
//
// Connection setup: for every pair the lower rank dials the higher one. Both ends prove
// the cluster secret by HMAC challenge-response (frame.h); the secret never travels.
// A connection that fails the challenge, speaks another version, or names an epoch older
// than the newest one this endpoint was asked for is refused and logged with the peer's
// address; connections for a newer epoch that arrive before connect_group() of that
// epoch are authenticated and parked until it is called. Nothing here throws.
//
// Against strangers on the network (docs/security.md): an accepted connection must finish
// its handshake within handshake_timeout or it is closed; at most max_handshaking are
// open at once, max_handshaking_per_source from one address (a new one evicts the oldest
// of its own source, or of the source holding the most); when accept() runs out of descriptors the
// oldest handshake is closed to make room, or, with none open, the listener backs off
// (50 ms doubling to 1 s) instead of spinning; refusals are logged through a LogLimiter (5 per kind
// per 10 s, then a count), so a flood of bad connections is a few lines.
//
// TLS (transport/tcp/tls.h): with config.tls.mode other than kOff, the pairs that connect_group()
// is told to encrypt (kAll: every pair; kCrossZone: pairs whose `zones` differ) run TLS
// 1.3 on the connection once both sides have accepted the handshake, before the link is
// built: a refused TLS handshake fails connect_group with kAuthFailed naming the peer and
// OpenSSL's reason, on both sides, and is logged and counted (tls_failures); a peer that
// decided differently is refused at the handshake (kMismatch, "TLS mode mismatch").
// connect_sockets() never encrypts (its users carry no data over the connections).
//
// Threading: one internal thread runs Asio for accepting and handshaking only; it never
// carries data. connect_group() blocks its caller until the group is up, fails, or the
// deadline passes. Links returned stay valid after the endpoint is destroyed (they own
// their sockets); destroying the endpoint refuses further connections.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/tcp/tcp_link.h"
#include "transport/tcp/tls.h"
#include "algorithms/link.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"

namespace tributary::transport {

// What a group's TCP links do that depends on where its ranks run (TcpTransport decides
// it from the group's adverts and this host's cores: transport/receive_paths.h).
struct TcpGroupOptions {
  bool combine = true;         // TcpLinkParams::combine
  bool core_per_rank = false;  // this host runs no more of the group's ranks than it has cores
};

struct TcpEndpointConfig {
  std::string bind_host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port, read back with port()
  std::string secret;      // the cluster secret; must not be empty
  std::size_t max_frame_bytes = std::size_t{1} << 30;
  std::uint64_t max_unexpected_bytes = 256ull << 20;  // per peer (TcpLinkParams)
  Duration handshake_timeout = std::chrono::seconds(5);
  // Accepted connections still in their handshake, at most; one more evicts the oldest (a
  // real peer finishes in milliseconds, so the oldest is the one that has stalled longest).
  std::size_t max_handshaking = 256;
  // Of those, from one source address at most (several agents on one host each dial).
  std::size_t max_handshaking_per_source = 32;
  // How long one connection attempt to one of a peer's addresses may take before the
  // next address is tried (an address that drops packets never answers).
  Duration connect_attempt_timeout = std::chrono::seconds(1);
  // How long Link::wait polls after the last look that found a socket ready before it
  // sleeps in poll(2) (TcpLinkParams::busy_poll; it yields the core between looks only
  // where the group's ranks on this host outnumber its cores). A wait that sleeps costs
  // its own wake-up and the sender a wake-up call: with 50 us, at N = 2 on 2 cores, a wait
  // slept ~1.4 times per all-reduce of 1 MiB per rank, most of what Tributary trailed
  // Open MPI (which never sleeps) by; with 8 ranks on 2 cores 500 us beat 50 by 6-16% at
  // 1-4 MiB (bench/results/tcp_wait_2026-11-28.md).
  Duration busy_poll = std::chrono::microseconds(500);
  // TCP congestion control for the connections of groups with a core per rank
  // (TcpGroupOptions::core_per_rank) whose two ends are on this host: no pacing on
  // loopback (transport/tcp/congestion.h says why, and why not elsewhere). Empty: the
  // system's default everywhere.
  std::string same_host_congestion = "cubic";
  // 0 keeps Linux's buffer autotuning, which on loopback beats any fixed size we could
  // set (a fixed SO_RCVBUF disables autotuning and is capped by net.core.rmem_max).
  int socket_buffer_bytes = 0;
  // TLS on data links (kOff: none); certificate files are loaded by listen().
  TlsConfig tls;
  // Where refusals and dropped connections are reported (the links of its groups log
  // through it too). The Worker passes its own Logger's child("link").
  Logger log{"link"};
};

struct TcpPeerStats {
  int rank = -1;
  std::string address;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;
};

struct TcpEndpointStats {
  std::uint64_t epoch = 0;          // of the latest group built
  std::vector<TcpPeerStats> peers;  // that group's peers by rank (own rank omitted)
  // Endpoint lifetime totals:
  std::uint64_t frames_dropped_stale_epoch = 0;
  std::uint64_t bad_frames = 0;         // malformed or corrupted (CRC failures included)
  std::uint64_t crc_failures = 0;       // frames whose CRC-32C did not match: corrupted in transit
  std::uint64_t unexpected_stalls = 0;  // see TcpLinkParams::max_unexpected_bytes
  std::uint64_t bytes_copied_unexpected = 0;  // arrived before their recv: one extra copy
  std::uint64_t handshakes_accepted = 0;
  std::uint64_t handshakes_rejected = 0;
  std::uint64_t tls_failures = 0;        // TLS handshakes refused or failed, either side
  std::uint64_t tls_peers = 0;           // the latest group's peers that run TLS
  std::uint64_t connections_parked = 0;  // right now
};

class TcpEndpoint {
 public:
  static Result<std::unique_ptr<TcpEndpoint>> listen(const TcpEndpointConfig& config);
  ~TcpEndpoint();
  TcpEndpoint(const TcpEndpoint&) = delete;
  TcpEndpoint& operator=(const TcpEndpoint&) = delete;

  std::uint16_t port() const;
  std::string address() const;  // "host:port" as peers should dial it

  // Builds epoch `epoch`'s links: addresses[r] lists rank r's "host:port" addresses
  // ("[v6]:port" for IPv6) in order of preference; the lower rank of each pair dials
  // them in that order, each attempt bounded by connect_attempt_timeout, and keeps the
  // first that connects (then the list starts over, until the deadline). Returns a Link
  // with rank() == rank and size() == addresses.size(), or: kAuthFailed (a peer refused
  // our secret or failed its challenge, or TLS failed), kStaleEpoch (epoch older than one already
  // built here, or a peer has moved past it), kMismatch (a peer disagrees on ranks, group size or
  // TLS), kTimedOut (someone missing at the deadline, named, with why each of its addresses
  // failed), kInvalidArgument. One call at a time per endpoint. `zones`: each rank's zone label,
  // for --tls cross-zone (empty: one zone). `options`: what the link does that depends on where the
  // group's ranks run.
  Result<std::unique_ptr<algorithms::Link>> connect_group(
      std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
      Deadline deadline, const std::vector<std::string>& zones = {}, TcpGroupOptions options = {});
  // The same with one address per rank.
  Result<std::unique_ptr<algorithms::Link>> connect_group(std::uint64_t epoch, int rank,
                                                          const std::vector<std::string>& addresses,
                                                          Deadline deadline,
                                                          const std::vector<std::string>& zones = {});
  // A group that mixes transports: every pair connects once, as in connect_group; the
  // pairs marked in `borrowed` (by rank) come back as connections of their own (blocking,
  // without TLS, as connect_sockets' are), for a transport that builds its link over them
  // (shared memory with the members on this host), and the others carry the returned TCP
  // link, where the borrowed pairs' operations fail with `why` until reconnect() and
  // replace_peer_socket put a TCP connection in (their fallback path). Same errors.
  struct SplitGroup {
    std::unique_ptr<algorithms::Link> link;
    std::vector<PeerSocket> borrowed;
  };
  Result<SplitGroup> connect_split(std::uint64_t epoch, int rank,
                                   const std::vector<std::vector<std::string>>& addresses,
                                   const std::vector<bool>& borrowed, Status why, Deadline deadline,
                                   const std::vector<std::string>& zones = {},
                                   TcpGroupOptions options = {});
  // The authenticated connections alone (blocking sockets, the caller owns them), for a
  // transport that builds its own link over them; same rules and errors.
  Result<std::vector<PeerSocket>> connect_sockets(
      std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
      Deadline deadline);

  // For a path that reconnects (transport/failover_link.h, FailoverParams::on_down): new
  // connections to `peers` of epoch `epoch`'s group (built here), whose connections
  // failed; both ends call it, the lower rank dials, with the handshake and TLS of
  // connect_group (a connection from a peer of the current epoch that arrives before
  // this call waits parked for it). Returns the sockets of the peers that connected by
  // the deadline (at least one; non-blocking, ready for a TcpLink: replace_peer_socket),
  // or connect_group's errors: kTimedOut (none connected), kStaleEpoch (a newer epoch was
  // built here), kAborted (cancel_connect). Not beside a connect_group of this endpoint.
  Result<std::vector<PeerSocket>> reconnect(
      std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
      const std::vector<int>& peers, Deadline deadline, const std::vector<std::string>& zones = {});

  // From any thread: a connect_group in progress for an epoch older than `newer_epoch`
  // returns kAborted promptly (a newer view superseded it). No effect otherwise.
  void cancel_connect(std::uint64_t newer_epoch);
  // From any thread: the connect_group of exactly `epoch` (in progress, or when it
  // begins) returns kAborted, while reconnects of that epoch are still made: a standby
  // group given up at the view's start, whose pairs are then re-dialled one by one.
  void cancel_group(std::uint64_t epoch);

  // A link of epoch `epoch`'s group (`addresses` by rank, as connect_group's) with no
  // connection yet: every peer's operations fail at once with `why` until reconnect() and
  // replace_peer_socket put one in. For a standby path that did not connect.
  Result<std::unique_ptr<algorithms::Link>> unconnected_link(
      std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
      Status why, TcpGroupOptions options = {});

  TcpEndpointStats stats() const;

  class Impl;

 private:
  explicit TcpEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary::transport
