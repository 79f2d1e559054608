#include "agent/tcp_endpoint.h"

#include <fcntl.h>
#include <poll.h>

#include <asio.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/frame.h"
#include "core/check.h"

namespace tributary::agent {

using asio::ip::tcp;

namespace {

constexpr std::size_t kMaxParked = 256;
constexpr auto kRetryInterval = std::chrono::milliseconds(20);

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" +
         std::to_string(ep.port());
}

std::string remote_text(const tcp::socket& s) {
  std::error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? std::string("unknown peer") : endpoint_text(ep);
}

// "host:port" or "[v6]:port".
bool split_address(const std::string& address, std::string* host, std::string* port) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->front() == '[') {
    if (host->size() < 3 || host->back() != ']') return false;
    *host = host->substr(1, host->size() - 2);
  }
  return true;
}

std::string_view reason_text(RejectReason r) {
  switch (r) {
    case RejectReason::kBadMessage: return "malformed handshake";
    case RejectReason::kVersion: return "protocol version mismatch";
    case RejectReason::kStaleEpoch: return "stale epoch";
    case RejectReason::kAuth: return "failed the cluster-secret challenge";
    case RejectReason::kGroupMismatch: return "ranks or group size disagree";
    case RejectReason::kBusy: return "too many parked connections";
  }
  return "unknown";
}

// The peer sent EOF or reset while parked: it gave up on us, so claiming it would only
// hand the new link a dead socket.
bool peer_hung_up(tcp::socket& s) {
  pollfd p{s.native_handle(), static_cast<short>(POLLIN | POLLRDHUP), 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

class TcpEndpoint::Impl {
 public:
  // A connection we accepted, from its first byte until it is claimed by a group.
  struct Incoming {
    explicit Incoming(tcp::socket s) : sock(std::move(s)), timer(sock.get_executor()) {}
    tcp::socket sock;
    asio::steady_timer timer;
    std::string peer;  // remote address, for the log
    HandshakeBytes buf{};
    HandshakeMessage hello;
    Nonce nonce{};
  };

  struct Slot {
    std::optional<tcp::socket> sock;  // set once authenticated both ways
    bool busy = false;                // a claim is writing ACCEPT
    std::string last_error;
  };

  // One connect_group call, shared between the caller and the I/O thread.
  struct Group {
    std::uint64_t epoch = 0;
    int rank = 0;
    int size = 0;
    std::vector<std::string> addresses;
    Deadline deadline;
    std::vector<tcp::endpoint> dial;  // by rank; meaningful for ranks above ours
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

  explicit Impl(const TcpEndpointConfig& config) : config_(config), acceptor_(io_) {
    if (!config_.log) {
      config_.log = [](const std::string& line) {
        std::fprintf(stderr, "tributary: %s\n", line.c_str());
      };
    }
  }

  ~Impl() {
    asio::post(io_, [this] {
      std::error_code ec;
      acceptor_.close(ec);
      if (const std::shared_ptr<Group> g = group_) {  // a copy: finish() resets group_
        finish(g, error(StatusCode::kAborted, "the endpoint is shutting down"));
      }
      parked_.clear();
      for (auto& in : handshaking_) {
        in->sock.close(ec);
        in->timer.cancel();
      }
      handshaking_.clear();
    });
    work_.reset();
    if (thread_.joinable()) thread_.join();
  }

  Status start() {
    std::error_code ec;
    const auto addr = asio::ip::make_address(config_.bind_host, ec);
    if (ec) return error(StatusCode::kInvalidArgument, "bad bind host '" + config_.bind_host + "'");
    const tcp::endpoint ep(addr, config_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return error(StatusCode::kUnavailable,
                   "cannot listen on " + endpoint_text(ep) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    address_ = endpoint_text(acceptor_.local_endpoint());
    accept_next();
    thread_ = std::thread([this] { io_.run(); });
    return Status();
  }

  std::uint16_t port() const { return port_; }
  std::string address() const { return address_; }

  Result<std::unique_ptr<algorithms::Link>> connect_group(std::uint64_t epoch, int rank,
                                                          const std::vector<std::string>& addresses,
                                                          Deadline deadline);

  TcpEndpointStats stats() const {
    TcpEndpointStats s;
    std::lock_guard lock(stats_mu_);
    s.epoch = stats_epoch_;
    s.frames_dropped_stale_epoch = retired_stale_;
    s.bad_frames = retired_bad_;
    s.bytes_copied_unexpected = retired_copied_;
    if (counters_) {
      for (std::size_t r = 0; r < counters_->peers.size(); ++r) {
        if (static_cast<int>(r) == stats_rank_) continue;
        const auto& c = counters_->peers[r];
        s.peers.push_back(TcpPeerStats{static_cast<int>(r), stats_addresses_[r],
                                       c.bytes_sent.load(), c.bytes_received.load(),
                                       c.frames_sent.load(), c.frames_received.load()});
      }
      s.frames_dropped_stale_epoch += counters_->frames_dropped_stale_epoch.load();
      s.bad_frames += counters_->bad_frames.load();
      s.bytes_copied_unexpected += counters_->bytes_copied_unexpected.load();
    }
    s.handshakes_accepted = handshakes_accepted_.load();
    s.handshakes_rejected = handshakes_rejected_.load();
    s.connections_parked = parked_count_.load();
    return s;
  }

 private:
  void log(const std::string& line) const { config_.log(line); }

  void configure(tcp::socket& s) {
    std::error_code ec;
    s.set_option(tcp::no_delay(true), ec);
    if (config_.socket_buffer_bytes > 0) {
      s.set_option(asio::socket_base::send_buffer_size(config_.socket_buffer_bytes), ec);
      s.set_option(asio::socket_base::receive_buffer_size(config_.socket_buffer_bytes), ec);
    }
  }

  // ---- accepting side (I/O thread) ----

  void accept_next() {
    acceptor_.async_accept([this](std::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) on_accepted(std::move(s));
      accept_next();
    });
  }

  void on_accepted(tcp::socket s) {
    configure(s);
    auto in = std::make_shared<Incoming>(std::move(s));
    in->peer = remote_text(in->sock);
    handshaking_.push_back(in);
    in->timer.expires_after(config_.handshake_timeout);
    in->timer.async_wait([this, in](std::error_code ec) {
      if (ec) return;
      refuse(in,
             "no complete handshake within " +
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    config_.handshake_timeout)
                                    .count()) +
                 " ms",
             std::nullopt);
    });
    // The magic first, so a stray client (HTTP, a port scanner, garbage) is refused at
    // once rather than when the handshake timer fires.
    asio::async_read(
        in->sock, asio::buffer(in->buf.data(), 4), [this, in](std::error_code ec, std::size_t) {
          if (ec) return drop(in);
          if (std::memcmp(in->buf.data(), encode_handshake(HandshakeMessage{}).data(), 4) != 0) {
            return refuse(in, "not a tributary handshake (bad magic)", std::nullopt);
          }
          asio::async_read(in->sock, asio::buffer(in->buf.data() + 4, in->buf.size() - 4),
                           [this, in](std::error_code ec2, std::size_t) {
                             if (ec2) return drop(in);
                             on_hello(in);
                           });
        });
  }

  void on_hello(const std::shared_ptr<Incoming>& in) {
    const auto raw_version = static_cast<std::uint8_t>(in->buf[4]);
    Result<HandshakeMessage> m = decode_handshake(in->buf);
    if (!m.is_ok()) {
      const bool ours = m.status().message().find("version") != std::string::npos;
      return refuse(in, m.status().message(),
                    ours && raw_version != kWireVersion ? std::optional(RejectReason::kVersion)
                                                        : std::nullopt);
    }
    if (m->type != HandshakeType::kHello) {
      return refuse(in, "expected a hello message", RejectReason::kBadMessage);
    }
    in->hello = *m;
    if (in->hello.epoch < floor_epoch_) {
      return refuse(in,
                    claim_text(in) + ": epoch " + std::to_string(in->hello.epoch) +
                        " is older than this endpoint's epoch " + std::to_string(floor_epoch_),
                    RejectReason::kStaleEpoch);
    }
    in->nonce = random_nonce();
    HandshakeMessage challenge;
    challenge.type = HandshakeType::kChallenge;
    challenge.nonce = in->nonce;
    in->buf = encode_handshake(challenge);
    asio::async_write(in->sock, asio::buffer(in->buf), [this, in](std::error_code ec, std::size_t) {
      if (ec) return drop(in);
      asio::async_read(in->sock, asio::buffer(in->buf),
                       [this, in](std::error_code ec2, std::size_t) {
                         if (ec2) return drop(in);
                         on_response(in);
                       });
    });
  }

  void on_response(const std::shared_ptr<Incoming>& in) {
    Result<HandshakeMessage> m = decode_handshake(in->buf);
    if (!m.is_ok()) return refuse(in, m.status().message(), RejectReason::kBadMessage);
    if (m->type != HandshakeType::kResponse) {
      return refuse(in, "expected a challenge response", RejectReason::kBadMessage);
    }
    const Mac expected =
        handshake_mac(config_.secret, HandshakeRole::kConnector, in->hello, in->nonce);
    if (!macs_equal(expected, m->mac)) {
      // Remembered so that a group missing this rank at its deadline says why, even if
      // the attempt came before connect_group() of its epoch.
      if (auth_failures_.size() < kMaxParked) {
        auth_failures_[{in->hello.epoch, static_cast<int>(in->hello.from_rank)}] =
            "a connection from " + in->peer +
            " claiming that rank failed the cluster-secret challenge";
      }
      return refuse(in, "peer failed the cluster-secret challenge (" + claim_text(in) + ")",
                    RejectReason::kAuth);
    }
    in->timer.cancel();
    std::erase(handshaking_, in);
    handshakes_accepted_.fetch_add(1);
    if (group_ && group_->epoch == in->hello.epoch) return claim(group_, in);
    if (in->hello.epoch < floor_epoch_) {
      return refuse(in, claim_text(in) + ": epoch moved on to " + std::to_string(floor_epoch_),
                    RejectReason::kStaleEpoch);
    }
    if (parked_.size() >= kMaxParked) {
      return refuse(in, "too many parked connections", RejectReason::kBusy);
    }
    auto& slot = parked_[{in->hello.epoch, static_cast<int>(in->hello.from_rank)}];
    slot = in;  // a newer attempt from the same rank replaces a stale one
    parked_count_.store(parked_.size());
  }

  std::string claim_text(const std::shared_ptr<Incoming>& in) const {
    return "claims rank " + std::to_string(in->hello.from_rank) + " of epoch " +
           std::to_string(in->hello.epoch);
  }

  // Logs, counts, tells the peer why (if it speaks the protocol) and closes.
  void refuse(const std::shared_ptr<Incoming>& in, const std::string& why,
              std::optional<RejectReason> reason) {
    handshakes_rejected_.fetch_add(1);
    log("rejected connection from " + in->peer + ": " + why);
    in->timer.cancel();
    std::erase(handshaking_, in);
    if (!reason) return drop(in);
    HandshakeMessage reject;
    reject.type = HandshakeType::kReject;
    reject.reason = *reason;
    reject.epoch = floor_epoch_;
    in->buf = encode_handshake(reject);
    asio::async_write(in->sock, asio::buffer(in->buf),
                      [this, in](std::error_code, std::size_t) { drop(in); });
  }

  void drop(const std::shared_ptr<Incoming>& in) {
    std::error_code ec;
    in->timer.cancel();
    in->sock.close(ec);
    std::erase(handshaking_, in);
  }

  void claim(const std::shared_ptr<Group>& g, const std::shared_ptr<Incoming>& in) {
    const int from = static_cast<int>(in->hello.from_rank);
    if (static_cast<int>(in->hello.to_rank) != g->rank ||
        static_cast<int>(in->hello.group_size) != g->size || from >= g->rank) {
      return refuse(in,
                    claim_text(in) + " dialing rank " + std::to_string(in->hello.to_rank) + " of " +
                        std::to_string(in->hello.group_size) + ", but we are rank " +
                        std::to_string(g->rank) + " of " + std::to_string(g->size),
                    RejectReason::kGroupMismatch);
    }
    Slot& slot = g->slots[from];
    if (slot.sock || slot.busy) {
      return refuse(in, claim_text(in) + ", already connected", RejectReason::kGroupMismatch);
    }
    if (peer_hung_up(in->sock)) return drop(in);
    slot.busy = true;
    HandshakeMessage accept;
    accept.type = HandshakeType::kAccept;
    accept.mac = handshake_mac(config_.secret, HandshakeRole::kAcceptor, in->hello, in->nonce);
    in->buf = encode_handshake(accept);
    asio::async_write(in->sock, asio::buffer(in->buf),
                      [this, g, in, from](std::error_code ec, std::size_t) {
                        Slot& s = g->slots[from];
                        s.busy = false;
                        if (g->finished) return drop(in);
                        if (ec) {
                          s.last_error = "connection from " + in->peer + " failed: " + ec.message();
                          return drop(in);
                        }
                        s.sock.emplace(std::move(in->sock));
                        maybe_complete(g);
                      });
  }

  // ---- dialing side (I/O thread) ----

  void dial(const std::shared_ptr<Group>& g, int peer) {
    if (g->finished) return;
    auto sock = std::make_shared<tcp::socket>(io_);
    g->dialing.push_back(sock);
    sock->async_connect(g->dial[peer], [this, g, peer, sock](std::error_code ec) {
      if (g->finished) return;
      if (ec) return redial(g, peer, sock, "cannot connect: " + ec.message());
      configure(*sock);
      HandshakeMessage hello;
      hello.type = HandshakeType::kHello;
      hello.epoch = g->epoch;
      hello.from_rank = static_cast<std::uint32_t>(g->rank);
      hello.to_rank = static_cast<std::uint32_t>(peer);
      hello.group_size = static_cast<std::uint32_t>(g->size);
      hello.nonce = random_nonce();
      auto buf = std::make_shared<HandshakeBytes>(encode_handshake(hello));
      asio::async_write(
          *sock, asio::buffer(*buf),
          [this, g, peer, sock, buf, hello](std::error_code ec2, std::size_t) {
            if (g->finished) return;
            if (ec2) return redial(g, peer, sock, "handshake failed: " + ec2.message());
            asio::async_read(*sock, asio::buffer(*buf),
                             [this, g, peer, sock, buf, hello](std::error_code ec3, std::size_t) {
                               if (g->finished) return;
                               if (ec3)
                                 return redial(g, peer, sock, "handshake failed: " + ec3.message());
                               on_challenge(g, peer, sock, buf, hello);
                             });
          });
    });
  }

  void on_challenge(const std::shared_ptr<Group>& g, int peer,
                    const std::shared_ptr<tcp::socket>& sock,
                    const std::shared_ptr<HandshakeBytes>& buf, const HandshakeMessage& hello) {
    Result<HandshakeMessage> m = decode_handshake(*buf);
    if (!m.is_ok()) return fail_dial(g, peer, sock, StatusCode::kBadFrame, m.status().message());
    if (m->type == HandshakeType::kReject) return on_reject(g, peer, sock, *m);
    if (m->type != HandshakeType::kChallenge) {
      return fail_dial(g, peer, sock, StatusCode::kBadFrame, "sent no challenge");
    }
    const Nonce acceptor_nonce = m->nonce;
    HandshakeMessage response;
    response.type = HandshakeType::kResponse;
    response.mac = handshake_mac(config_.secret, HandshakeRole::kConnector, hello, acceptor_nonce);
    *buf = encode_handshake(response);
    asio::async_write(
        *sock, asio::buffer(*buf),
        [this, g, peer, sock, buf, hello, acceptor_nonce](std::error_code ec, std::size_t) {
          if (g->finished) return;
          if (ec) return redial(g, peer, sock, "handshake failed: " + ec.message());
          asio::async_read(
              *sock, asio::buffer(*buf),
              [this, g, peer, sock, buf, hello, acceptor_nonce](std::error_code ec2, std::size_t) {
                if (g->finished) return;
                if (ec2)
                  return redial(g, peer, sock,
                                "closed the connection during the handshake: " + ec2.message());
                Result<HandshakeMessage> a = decode_handshake(*buf);
                if (!a.is_ok())
                  return fail_dial(g, peer, sock, StatusCode::kBadFrame, a.status().message());
                if (a->type == HandshakeType::kReject) return on_reject(g, peer, sock, *a);
                if (a->type != HandshakeType::kAccept) {
                  return fail_dial(g, peer, sock, StatusCode::kBadFrame, "sent no accept");
                }
                const Mac expected =
                    handshake_mac(config_.secret, HandshakeRole::kAcceptor, hello, acceptor_nonce);
                if (!macs_equal(expected, a->mac)) {
                  return fail_dial(g, peer, sock, StatusCode::kAuthFailed,
                                   "failed the cluster-secret challenge");
                }
                std::erase(g->dialing, sock);
                g->slots[peer].sock.emplace(std::move(*sock));
                maybe_complete(g);
              });
        });
  }

  void on_reject(const std::shared_ptr<Group>& g, int peer,
                 const std::shared_ptr<tcp::socket>& sock, const HandshakeMessage& m) {
    switch (m.reason) {
      case RejectReason::kAuth:
        return fail_dial(g, peer, sock, StatusCode::kAuthFailed, "rejected our secret");
      case RejectReason::kStaleEpoch:
        return fail_dial(g, peer, sock, StatusCode::kStaleEpoch,
                         "refused epoch " + std::to_string(g->epoch) +
                             ": it has moved on to epoch " + std::to_string(m.epoch));
      case RejectReason::kBusy: return redial(g, peer, sock, "is busy");
      default:
        return fail_dial(g, peer, sock, StatusCode::kMismatch,
                         "refused the connection: " + std::string(reason_text(m.reason)));
    }
  }

  void redial(const std::shared_ptr<Group>& g, int peer, const std::shared_ptr<tcp::socket>& sock,
              std::string why) {
    std::error_code ec;
    sock->close(ec);
    std::erase(g->dialing, sock);
    g->slots[peer].last_error = std::move(why);
    auto timer = std::make_shared<asio::steady_timer>(io_, kRetryInterval);
    timer->async_wait([this, g, peer, timer](std::error_code) { dial(g, peer); });
  }

  void fail_dial(const std::shared_ptr<Group>& g, int peer,
                 const std::shared_ptr<tcp::socket>& sock, StatusCode code,
                 const std::string& why) {
    std::error_code ec;
    sock->close(ec);
    std::erase(g->dialing, sock);
    const std::string line =
        "rank " + std::to_string(peer) + " at " + g->addresses[peer] + " " + why;
    log("epoch " + std::to_string(g->epoch) + ": " + line);
    finish(g, error(code, line));
  }

  // ---- group lifecycle (I/O thread) ----

  void begin(const std::shared_ptr<Group>& g) {
    if (const std::uint64_t newer = cancel_below_.load(); g->epoch < newer) {
      return finish(
          g, error(StatusCode::kAborted, "connecting view " + std::to_string(g->epoch) +
                                             " superseded by view " + std::to_string(newer)));
    }
    if (g->epoch < floor_epoch_) {
      return finish(g, error(StatusCode::kStaleEpoch,
                             "epoch " + std::to_string(g->epoch) + " is older than epoch " +
                                 std::to_string(floor_epoch_) + " already built here"));
    }
    floor_epoch_ = g->epoch;
    group_ = g;
    for (auto it = parked_.begin(); it != parked_.end();) {
      const auto [epoch, from] = it->first;
      if (epoch > g->epoch) break;
      std::shared_ptr<Incoming> in = std::move(it->second);
      it = parked_.erase(it);
      if (epoch < g->epoch) {
        log("dropping parked connection from " + in->peer + " of stale epoch " +
            std::to_string(epoch));
        drop(in);
      } else {
        claim(g, in);
      }
    }
    parked_count_.store(parked_.size());
    std::erase_if(auth_failures_, [&](const auto& kv) { return kv.first.first < g->epoch; });
    if (g->finished) return;
    g->deadline_timer.emplace(io_, g->deadline.at);
    g->deadline_timer->async_wait([this, g](std::error_code ec) {
      if (!ec) on_deadline(g);
    });
    for (int peer = g->rank + 1; peer < g->size; ++peer) dial(g, peer);
    maybe_complete(g);
  }

  void on_deadline(const std::shared_ptr<Group>& g) {
    std::string missing;
    bool auth = false;
    for (int r = 0; r < g->size; ++r) {
      const Slot& s = g->slots[r];
      if (r == g->rank || s.sock) continue;
      if (!missing.empty()) missing += "; ";
      missing += "rank " + std::to_string(r) + " at " + g->addresses[r];
      missing += r < g->rank ? " never connected to us" : " not connected";
      if (auto it = auth_failures_.find({g->epoch, r}); it != auth_failures_.end()) {
        missing += " (" + it->second + ")";
        auth = true;
      } else if (!s.last_error.empty()) {
        missing += " (" + s.last_error + ")";
      }
    }
    finish(g, error(auth ? StatusCode::kAuthFailed : StatusCode::kTimedOut,
                    "epoch " + std::to_string(g->epoch) +
                        " group not complete by the deadline: " + missing));
  }

  void maybe_complete(const std::shared_ptr<Group>& g) {
    for (int r = 0; r < g->size; ++r) {
      if (r != g->rank && !g->slots[r].sock) return;
    }
    finish(g, Status());
  }

  // Ends a connect_group still in progress for an epoch older than `newer`, with kAborted:
  // a newer view made it moot, and its missing peer may be gone for good.
  void cancel_connect(std::uint64_t newer) {
    // Remembered, so that a connect_group that has not reached the I/O thread yet is
    // cancelled too (begin() checks it).
    std::uint64_t seen = cancel_below_.load();
    while (seen < newer && !cancel_below_.compare_exchange_weak(seen, newer)) {
    }
    asio::post(io_, [this, newer] {
      // A copy: finish() resets group_, which must not pull the group out from under it.
      if (const std::shared_ptr<Group> g = group_; g && g->epoch < newer) {
        finish(g, error(StatusCode::kAborted, "connecting view " + std::to_string(g->epoch) +
                                                  " superseded by view " + std::to_string(newer)));
      }
    });
  }

  void finish(const std::shared_ptr<Group>& g, Status st) {
    if (g->finished) return;
    g->finished = true;
    if (group_ == g) group_.reset();
    if (g->deadline_timer) g->deadline_timer->cancel();
    std::error_code ec;
    for (auto& s : g->dialing) s->close(ec);
    g->dialing.clear();
    std::vector<PeerSocket> sockets;
    for (int r = 0; r < g->size; ++r) {
      Slot& slot = g->slots[r];
      if (!slot.sock) continue;
      if (st.is_ok()) {
        // The link drives these with poll(2) from then on; Asio lets go of them here.
        const int fd = slot.sock->release(ec);
        if (ec) {
          st = error(StatusCode::kInternal, "cannot take over the socket of rank " +
                                                std::to_string(r) + ": " + ec.message());
        } else {
          sockets.push_back(PeerSocket{r, fd, g->addresses[r]});
          continue;
        }
      }
      slot.sock->close(ec);
    }
    if (!st.is_ok()) {
      for (const PeerSocket& s : sockets) ::close(s.fd);
      sockets.clear();
    }
    std::lock_guard lock(g->mu);
    g->result = std::move(st);
    g->sockets = std::move(sockets);
    g->done = true;
    g->cv.notify_all();
  }

  friend class TcpEndpoint;

  TcpEndpointConfig config_;
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
  std::atomic<std::uint64_t> cancel_below_{0};  // connect_group of older epochs: kAborted
  std::vector<std::shared_ptr<Incoming>> handshaking_;
  std::map<std::pair<std::uint64_t, int>, std::shared_ptr<Incoming>> parked_;
  std::map<std::pair<std::uint64_t, int>, std::string> auth_failures_;  // (epoch, claimed rank)

  std::atomic<std::uint64_t> handshakes_accepted_{0};
  std::atomic<std::uint64_t> handshakes_rejected_{0};
  std::atomic<std::uint64_t> parked_count_{0};
  mutable std::mutex stats_mu_;
  std::shared_ptr<LinkCounters> counters_;  // the latest group's
  std::vector<std::string> stats_addresses_;
  int stats_rank_ = -1;
  std::uint64_t stats_epoch_ = 0;
  std::uint64_t retired_stale_ = 0;
  std::uint64_t retired_bad_ = 0;
  std::uint64_t retired_copied_ = 0;
};

Result<std::unique_ptr<algorithms::Link>> TcpEndpoint::Impl::connect_group(
    std::uint64_t epoch, int rank, const std::vector<std::string>& addresses, Deadline deadline) {
  const int size = static_cast<int>(addresses.size());
  if (size < 1 || rank < 0 || rank >= size) {
    return error(StatusCode::kInvalidArgument,
                 "rank " + std::to_string(rank) + " in a group of " + std::to_string(size));
  }
  TRIB_CHECK(!in_connect_.exchange(true)) << "concurrent connect_group calls on one endpoint";
  struct Reset {
    std::atomic<bool>* flag;
    ~Reset() { flag->store(false); }
  } reset{&in_connect_};

  auto g = std::make_shared<Group>();
  g->epoch = epoch;
  g->rank = rank;
  g->size = size;
  g->addresses = addresses;
  g->slots.resize(static_cast<std::size_t>(size));
  g->dial.resize(static_cast<std::size_t>(size));
  g->deadline = deadline;
  {
    // Resolve up front so a typo fails at once instead of at the deadline.
    asio::io_context resolve_io;
    tcp::resolver resolver(resolve_io);
    for (int peer = rank + 1; peer < size; ++peer) {
      std::string host, port;
      if (!split_address(addresses[peer], &host, &port)) {
        return error(StatusCode::kInvalidArgument, "bad address '" + addresses[peer] +
                                                       "' for rank " + std::to_string(peer) +
                                                       " (want host:port)");
      }
      std::error_code ec;
      auto results = resolver.resolve(host, port, tcp::resolver::numeric_service, ec);
      if (ec || results.empty()) {
        return error(StatusCode::kInvalidArgument, "cannot resolve '" + addresses[peer] +
                                                       "' for rank " + std::to_string(peer) + ": " +
                                                       ec.message());
      }
      g->dial[peer] = results.begin()->endpoint();
    }
  }
  asio::post(io_, [this, g] { begin(g); });
  std::unique_lock lock(g->mu);
  g->cv.wait(lock, [&] { return g->done; });
  if (!g->result.is_ok()) return g->result;

  auto counters = std::make_shared<LinkCounters>(size);
  {
    std::lock_guard stats_lock(stats_mu_);
    if (counters_) {
      retired_stale_ += counters_->frames_dropped_stale_epoch.load();
      retired_bad_ += counters_->bad_frames.load();
      retired_copied_ += counters_->bytes_copied_unexpected.load();
    }
    counters_ = counters;
    stats_addresses_ = addresses;
    stats_rank_ = rank;
    stats_epoch_ = epoch;
  }
  for (const PeerSocket& s : g->sockets) {
    const int flags = ::fcntl(s.fd, F_GETFL);
    ::fcntl(s.fd, F_SETFL, flags | O_NONBLOCK);
  }
  TcpLinkParams params;
  params.epoch = epoch;
  params.rank = rank;
  params.size = size;
  params.max_frame_bytes = config_.max_frame_bytes;
  params.busy_poll = config_.busy_poll;
  params.log = config_.log;
  params.counters = std::move(counters);
  return make_tcp_link(std::move(params), std::move(g->sockets));
}

TcpEndpoint::TcpEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpEndpoint::~TcpEndpoint() = default;

Result<std::unique_ptr<TcpEndpoint>> TcpEndpoint::listen(const TcpEndpointConfig& config) {
  if (config.secret.empty()) {
    return error(StatusCode::kInvalidArgument, "the cluster secret must not be empty");
  }
  if (config.max_frame_bytes == 0) {
    return error(StatusCode::kInvalidArgument, "max_frame_bytes must be positive");
  }
  auto impl = std::make_unique<Impl>(config);
  TRIB_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<TcpEndpoint>(new TcpEndpoint(std::move(impl)));
}

std::uint16_t TcpEndpoint::port() const { return impl_->port(); }
std::string TcpEndpoint::address() const { return impl_->address(); }

Result<std::unique_ptr<algorithms::Link>> TcpEndpoint::connect_group(
    std::uint64_t epoch, int rank, const std::vector<std::string>& addresses, Deadline deadline) {
  return impl_->connect_group(epoch, rank, addresses, deadline);
}

void TcpEndpoint::cancel_connect(std::uint64_t newer_epoch) { impl_->cancel_connect(newer_epoch); }

TcpEndpointStats TcpEndpoint::stats() const { return impl_->stats(); }

}  // namespace tributary::agent
