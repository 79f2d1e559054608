// TcpEndpoint::Impl, shared by the endpoint's two halves: its lifecycle and the building
// of each epoch's group (tcp_endpoint.cc), and the authenticated handshake on both the
// accepting and the dialing side (tcp_handshake.cc). Internal to agent/.
//
// Threading: everything below "I/O thread only" runs on the Asio thread; connect_group()
// runs on its caller's thread and meets the I/O thread through Group's mutex, and
// cancel_connect() and stats() may come from any thread.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp/frame.h"
#include "transport/tcp/tcp_endpoint.h"
#include "transport/tcp/tls_stream.h"
#include "core/log_limiter.h"

namespace tributary::transport {

using asio::ip::tcp;

// "host:port", or "[v6]:port".
inline std::string endpoint_text(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" +
         std::to_string(ep.port());
}

class TcpEndpoint::Impl {
 public:
  // A connection we accepted, from its first byte until it is claimed by a group.
  struct Incoming {
    explicit Incoming(tcp::socket s) : sock(std::move(s)), timer(sock.get_executor()) {}
    tcp::socket sock;
    asio::steady_timer timer;
    std::string peer;    // remote address and port, for the log
    std::string source;  // remote address alone: the unit of the per-source bound
    HandshakeBytes buf{};
    HandshakeMessage hello;
    Nonce nonce{};
  };

  struct Slot {
    std::optional<tcp::socket> sock;  // set once authenticated both ways
    std::string address;              // the one it connected on (dialed, or the remote end)
    bool busy = false;                // a claim is writing ACCEPT
    std::string last_error;
    // TLS, once authenticated: whether the pair runs it, and its pre-shared key.
    bool tls = false;
    Mac psk{};
    // Dialing side: the address tried next, and why each one failed last.
    std::size_t next = 0;
    std::vector<std::string> address_errors;
    // Bounds the current attempt, connect and handshake together: an address that drops
    // packets, or a listener that never answers, gives way to the next address.
    std::shared_ptr<asio::steady_timer> attempt_timer;
    bool attempt_expired = false;
  };

  // One connect_group call, shared between the caller and the I/O thread.
  struct Group {
    std::uint64_t epoch = 0;
    int rank = 0;
    int size = 0;
    std::vector<std::vector<std::string>> addresses;  // by rank, in order of preference
    std::vector<bool> tls;                            // by rank: this pair runs TLS
    Deadline deadline;
    // By rank: the peers this call connects (every one for a group; the failed pairs for
    // a reconnect). Connections from the others for this epoch stay parked.
    std::vector<bool> wanted;
    // A reconnect: at the deadline, what connected is the result (at least one peer).
    bool partial = false;
    std::vector<std::vector<tcp::endpoint>> dial;  // by rank; meaningful for ranks above ours
    std::vector<Slot> slots;
    std::vector<std::shared_ptr<tcp::socket>> dialing;
    std::optional<asio::steady_timer> deadline_timer;
    bool finished = false;  // I/O thread only
    // Handed to the caller:
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status result;
    std::vector<PeerSocket> sockets;
  };

  Impl(const TcpEndpointConfig& config, std::shared_ptr<TlsContext> tls)
      : config_(config), tls_context_(std::move(tls)), acceptor_(io_) {}
  ~Impl();

  Status start();
  std::uint16_t port() const { return port_; }
  std::string address() const { return address_; }
  // `tls`: by rank, the pairs that run TLS (empty: none). `peers`: the ranks to connect
  // (empty: every one), and then, with `partial`, those that connected by the deadline.
  Result<std::vector<PeerSocket>> connect_sockets(
      std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
      Deadline deadline, std::vector<bool> tls = {}, const std::vector<int>& peers = {},
      bool partial = false);
  // By rank, which pairs run TLS under config_.tls with these zone labels.
  std::vector<bool> tls_pairs(int rank, int size, const std::vector<std::string>& zones) const;
  // Non-blocking, and TLS established where the socket carries a stream; closes them all
  // on failure. `group`: these are a whole group's (its TLS peers are counted).
  Status prepare(std::uint64_t epoch, std::vector<PeerSocket>& sockets, Deadline deadline,
                 bool group);
  // `size` ranks; a rank with no socket in `sockets` is unconnected (TcpLinkParams), its
  // name taken from `names` (by rank, may be empty).
  Result<std::unique_ptr<algorithms::Link>> make_link(std::uint64_t epoch, int rank, int size,
                                                      std::vector<PeerSocket> sockets,
                                                      Deadline deadline, TcpGroupOptions options,
                                                      Status unconnected = Status(),
                                                      const std::vector<std::string>& names = {});
  void cancel_connect(std::uint64_t newer);
  void cancel_group(std::uint64_t epoch);
  // A connect_group (not a reconnect) of the epoch cancel_group gave up ends with kAborted.
  // I/O thread.
  bool finish_if_given_up(const std::shared_ptr<Group>& g);
  TcpEndpointStats stats() const;

 private:
  void configure(tcp::socket& s);
  // The TLS handshakes of the sockets that carry a stream, at once, by `deadline`; failures
  // are logged and counted.
  Status establish_tls(std::uint64_t epoch, std::vector<PeerSocket>& sockets, Deadline deadline,
                       bool group);

  // ---- accepting side (tcp_handshake.cc, I/O thread) ----
  void accept_next();
  // accept() failed for want of descriptors or memory: close the oldest connection still
  // handshaking and accept again, or, with none to close, leave the listener alone for a
  // while (doubling) instead of spinning.
  void back_off_accept(const std::error_code& ec);
  void on_accepted(tcp::socket s);
  // Before `in` joins handshaking_: evicts the oldest unfinished handshake of its source
  // when that source is at its bound, else, at the total bound, the oldest of the source
  // holding the most (a flood from one place evicts its own connections, not a peer's).
  void make_room_for(const Incoming& in);
  // Peer-caused lines go through the limiter (LogLimiter's key: the kind of refusal).
  void log_refusal(std::string_view kind, const std::string& line);
  void flush_log_periodically();
  void on_hello(const std::shared_ptr<Incoming>& in);
  void on_response(const std::shared_ptr<Incoming>& in);
  std::string claim_text(const std::shared_ptr<Incoming>& in) const {
    return "claims rank " + std::to_string(in->hello.from_rank) + " of epoch " +
           std::to_string(in->hello.epoch);
  }
  // `kind` groups the line for the log limiter.
  void refuse(const std::shared_ptr<Incoming>& in, std::string_view kind, const std::string& why,
              std::optional<RejectReason> reason);
  void drop(const std::shared_ptr<Incoming>& in);
  void claim(const std::shared_ptr<Group>& g, const std::shared_ptr<Incoming>& in);

  // ---- dialing side (tcp_handshake.cc, I/O thread) ----
  void dial(const std::shared_ptr<Group>& g, int peer);
  void on_challenge(const std::shared_ptr<Group>& g, int peer,
                    const std::shared_ptr<tcp::socket>& sock,
                    const std::shared_ptr<HandshakeBytes>& buf, const HandshakeMessage& hello);
  void on_reject(const std::shared_ptr<Group>& g, int peer,
                 const std::shared_ptr<tcp::socket>& sock, const HandshakeMessage& m);
  // Tries the peer's next address (after a pause once every address has failed).
  void redial(const std::shared_ptr<Group>& g, int peer, const std::shared_ptr<tcp::socket>& sock,
              std::string why);
  void on_connected(const std::shared_ptr<Group>& g, int peer,
                    const std::shared_ptr<tcp::socket>& sock);
  void fail_dial(const std::shared_ptr<Group>& g, int peer,
                 const std::shared_ptr<tcp::socket>& sock, StatusCode code, const std::string& why);

  // ---- group lifecycle (tcp_endpoint.cc, I/O thread) ----
  void begin(const std::shared_ptr<Group>& g);
  void on_deadline(const std::shared_ptr<Group>& g);
  // The peers a group still lacks, each with what its connection last saw ("rank 2 at
  // host:port not connected (...: Connection refused)"); `auth` set when one failed to
  // authenticate.
  std::string describe_missing(const Group& g, bool* auth) const;
  void maybe_complete(const std::shared_ptr<Group>& g);
  void finish(const std::shared_ptr<Group>& g, Status st);

  TcpEndpointConfig config_;
  std::shared_ptr<TlsContext> tls_context_;  // null with TLS off
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::uint16_t port_ = 0;
  std::string address_;
  std::atomic<bool> in_connect_{false};

  // I/O thread only.
  std::uint64_t floor_epoch_ = 0;
  std::shared_ptr<Group> group_;
  std::atomic<std::uint64_t> cancel_below_{0};          // connect_group of older epochs: kAborted
  std::atomic<std::uint64_t> cancel_epoch_{~std::uint64_t{0}};  // connect_group of this epoch: kAborted
  std::vector<std::shared_ptr<Incoming>> handshaking_;  // oldest first
  asio::steady_timer accept_timer_{io_};
  Duration accept_backoff_{};
  asio::steady_timer log_flush_timer_{io_};
  LogLimiter log_limiter_;
  std::map<std::pair<std::uint64_t, int>, std::shared_ptr<Incoming>> parked_;
  std::map<std::pair<std::uint64_t, int>, std::string> auth_failures_;  // (epoch, claimed rank)

  std::atomic<std::uint64_t> handshakes_accepted_{0};
  std::atomic<std::uint64_t> handshakes_rejected_{0};
  std::atomic<std::uint64_t> parked_count_{0};
  std::atomic<std::uint64_t> tls_failures_{0};
  std::atomic<std::uint64_t> tls_peers_{0};
  mutable std::mutex stats_mu_;
  std::shared_ptr<LinkCounters> counters_;    // the latest group's
  std::vector<std::string> stats_addresses_;  // by rank: the address each peer connected on
  int stats_rank_ = -1;
  std::uint64_t stats_epoch_ = 0;
  std::uint64_t retired_stale_ = 0;
  std::uint64_t retired_bad_ = 0;
  std::uint64_t retired_crc_ = 0;
  std::uint64_t retired_stalls_ = 0;
  std::uint64_t retired_copied_ = 0;
};

}  // namespace tributary::transport
