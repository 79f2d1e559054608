// The endpoint's handshakes (frame.h): HMAC challenge-response on accepted connections,
// parking connections for epochs not built yet, and dialing peers with retries. Every
// function here runs on the endpoint's I/O thread.
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "transport/tcp/tcp_endpoint_impl.h"

namespace tributary::transport {
namespace {

// The most connections parked (authenticated, for an epoch not built yet) or remembered
// as auth failures at once.
constexpr std::size_t kMaxParked = 256;
constexpr auto kRetryInterval = std::chrono::milliseconds(20);
constexpr Duration kFirstAcceptBackoff = std::chrono::milliseconds(50);
constexpr Duration kMaxAcceptBackoff = std::chrono::seconds(1);
constexpr Duration kLogFlushInterval = std::chrono::seconds(10);

// accept() errors that say this process or the system is out of a resource: retrying at
// once fails again at once.
bool out_of_resources(const std::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
         ec == asio::error::no_memory || ec == std::errc::too_many_files_open_in_system;
}

std::string millis(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

std::string remote_text(const tcp::socket& s) {
  std::error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? std::string("unknown peer") : endpoint_text(ep);
}

std::string_view reason_text(RejectReason r) {
  switch (r) {
    case RejectReason::kBadMessage: return "malformed handshake";
    case RejectReason::kVersion: return "protocol version mismatch";
    case RejectReason::kStaleEpoch: return "stale epoch";
    case RejectReason::kAuth: return "failed the cluster-secret challenge";
    case RejectReason::kGroupMismatch: return "ranks or group size disagree";
    case RejectReason::kBusy: return "too many parked connections";
    case RejectReason::kTlsMismatch: return "TLS mode mismatch";
  }
  return "unknown";
}

std::string tls_text(bool tls, bool certificates) {
  if (!tls) return "no TLS";
  return certificates ? "TLS with certificates" : "TLS with the pre-shared key";
}

// The peer sent EOF or reset while parked: it gave up on us, so claiming it would only
// hand the new link a dead socket.
bool peer_hung_up(tcp::socket& s) {
  pollfd p{s.native_handle(), static_cast<short>(POLLIN | POLLRDHUP), 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

void TcpEndpoint::Impl::accept_next() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (out_of_resources(ec)) return back_off_accept(ec);
    accept_backoff_ = Duration::zero();
    if (!ec) on_accepted(std::move(s));
    accept_next();  // other errors belong to the one connection (ECONNABORTED)
  });
}

void TcpEndpoint::Impl::back_off_accept(const std::error_code& ec) {
  // Linux's accept() takes a descriptor before it looks at the queue, and Asio tries it
  // before waiting: EMFILE also comes with nobody waiting, where closing a handshake would
  // evict an innocent peer. Wait for a connection first.
  pollfd waiting{acceptor_.native_handle(), POLLIN, 0};
  if (::poll(&waiting, 1, 0) == 0) {
    acceptor_.async_wait(tcp::acceptor::wait_read, [this](std::error_code e) {
      if (!e && acceptor_.is_open()) accept_next();
    });
    return;
  }
  if (!handshaking_.empty()) {
    // Room for the connection waiting in the backlog: the oldest unfinished handshake
    // (a real peer's takes milliseconds) goes. Each retry then accepts one connection, so
    // this runs at the rate connections arrive, never in a loop of its own.
    const std::shared_ptr<Incoming> oldest = handshaking_.front();
    handshakes_rejected_.fetch_add(1);
    log_refusal("descriptors", "out of file descriptors (" + ec.message() +
                                   "): closing the oldest unfinished handshake, from " +
                                   oldest->peer);
    drop(oldest);
    return accept_next();
  }
  accept_backoff_ = accept_backoff_ == Duration::zero()
                        ? kFirstAcceptBackoff
                        : std::min(2 * accept_backoff_, kMaxAcceptBackoff);
  log_refusal("accept", "cannot accept connections: " + ec.message() + "; retrying in " +
                            millis(accept_backoff_));
  accept_timer_.expires_after(accept_backoff_);
  accept_timer_.async_wait([this](std::error_code e) {
    if (!e && acceptor_.is_open()) accept_next();
  });
}

void TcpEndpoint::Impl::log_refusal(std::string_view kind, const std::string& line) {
  log_limiter_.log(config_.log, LogLevel::kWarn, kind, line, std::chrono::steady_clock::now());
}

void TcpEndpoint::Impl::flush_log_periodically() {
  log_flush_timer_.expires_after(kLogFlushInterval);
  log_flush_timer_.async_wait([this](std::error_code ec) {
    if (ec || !acceptor_.is_open()) return;
    log_limiter_.flush(config_.log, LogLevel::kWarn, std::chrono::steady_clock::now());
    flush_log_periodically();
  });
}

void TcpEndpoint::Impl::make_room_for(const Incoming& in) {
  std::map<std::string_view, std::size_t> per_source;
  for (const auto& h : handshaking_) ++per_source[h->source];
  std::string_view evict_from;
  if (per_source[in.source] >= config_.max_handshaking_per_source) {
    evict_from = in.source;
  } else if (handshaking_.size() >= config_.max_handshaking) {
    evict_from = std::max_element(per_source.begin(), per_source.end(), [](auto& a, auto& b) {
                   return a.second < b.second;
                 })->first;
  } else {
    return;
  }
  const auto it = std::find_if(handshaking_.begin(), handshaking_.end(),
                               [&](const auto& h) { return h->source == evict_from; });
  if (it == handshaking_.end()) return;
  const std::shared_ptr<Incoming> oldest = *it;  // refuse() erases it from handshaking_
  refuse(oldest, "evicted",
         "evicted: " + std::to_string(per_source[evict_from]) + " of the " +
             std::to_string(handshaking_.size()) +
             " connections still handshaking came from its address, and this one the longest",
         std::nullopt);
}

void TcpEndpoint::Impl::on_accepted(tcp::socket s) {
  configure(s);
  auto in = std::make_shared<Incoming>(std::move(s));
  in->peer = remote_text(in->sock);
  std::error_code ec;
  const auto remote = in->sock.remote_endpoint(ec);
  in->source = ec ? in->peer : remote.address().to_string();
  make_room_for(*in);
  handshaking_.push_back(in);
  in->timer.expires_after(config_.handshake_timeout);
  in->timer.async_wait([this, in](std::error_code ec) {
    if (ec) return;
    refuse(in, "timeout", "no complete handshake within " + millis(config_.handshake_timeout),
           std::nullopt);
  });
  // The magic first, so a stray client (HTTP, a port scanner, garbage) is refused at
  // once rather than when the handshake timer fires.
  asio::async_read(
      in->sock, asio::buffer(in->buf.data(), 4), [this, in](std::error_code ec, std::size_t) {
        if (ec) return drop(in);
        if (std::memcmp(in->buf.data(), encode_handshake(HandshakeMessage{}).data(), 4) != 0) {
          return refuse(in, "magic", "not a tributary handshake (bad magic)", std::nullopt);
        }
        asio::async_read(in->sock, asio::buffer(in->buf.data() + 4, in->buf.size() - 4),
                         [this, in](std::error_code ec2, std::size_t) {
                           if (ec2) return drop(in);
                           on_hello(in);
                         });
      });
}

void TcpEndpoint::Impl::on_hello(const std::shared_ptr<Incoming>& in) {
  const auto raw_version = static_cast<std::uint8_t>(in->buf[4]);
  Result<HandshakeMessage> m = decode_handshake(in->buf);
  if (!m.is_ok()) {
    const bool ours = m.status().message().find("version") != std::string::npos;
    return refuse(
        in, "malformed", m.status().message(),
        ours && raw_version != kWireVersion ? std::optional(RejectReason::kVersion) : std::nullopt);
  }
  if (m->type != HandshakeType::kHello) {
    return refuse(in, "malformed", "expected a hello message", RejectReason::kBadMessage);
  }
  in->hello = *m;
  if (in->hello.epoch < floor_epoch_) {
    return refuse(in, "stale",
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
    asio::async_read(in->sock, asio::buffer(in->buf), [this, in](std::error_code ec2, std::size_t) {
      if (ec2) return drop(in);
      on_response(in);
    });
  });
}

void TcpEndpoint::Impl::on_response(const std::shared_ptr<Incoming>& in) {
  Result<HandshakeMessage> m = decode_handshake(in->buf);
  if (!m.is_ok()) return refuse(in, "malformed", m.status().message(), RejectReason::kBadMessage);
  if (m->type != HandshakeType::kResponse) {
    return refuse(in, "malformed", "expected a challenge response", RejectReason::kBadMessage);
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
    return refuse(in, "auth", "peer failed the cluster-secret challenge (" + claim_text(in) + ")",
                  RejectReason::kAuth);
  }
  in->timer.cancel();
  std::erase(handshaking_, in);
  handshakes_accepted_.fetch_add(1);
  if (group_ && group_->epoch == in->hello.epoch) {
    const int from = static_cast<int>(in->hello.from_rank);
    // A reconnect of other pairs is under way: this one is parked for its own.
    const bool other = from >= 0 && from < group_->size && !group_->wanted[from];
    if (!other) return claim(group_, in);
  }
  if (in->hello.epoch < floor_epoch_) {
    return refuse(in, "stale",
                  claim_text(in) + ": epoch moved on to " + std::to_string(floor_epoch_),
                  RejectReason::kStaleEpoch);
  }
  if (parked_.size() >= kMaxParked) {
    return refuse(in, "busy", "too many parked connections", RejectReason::kBusy);
  }
  auto& slot = parked_[{in->hello.epoch, static_cast<int>(in->hello.from_rank)}];
  slot = in;  // a newer attempt from the same rank replaces a stale one
  parked_count_.store(parked_.size());
}

// Logs, counts, tells the peer why (if it speaks the protocol) and closes.
void TcpEndpoint::Impl::refuse(const std::shared_ptr<Incoming>& in, std::string_view kind,
                               const std::string& why, std::optional<RejectReason> reason) {
  handshakes_rejected_.fetch_add(1);
  log_refusal(kind, "rejected connection from " + in->peer + ": " + why);
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

void TcpEndpoint::Impl::drop(const std::shared_ptr<Incoming>& in) {
  std::error_code ec;
  in->timer.cancel();
  in->sock.close(ec);
  std::erase(handshaking_, in);
}

void TcpEndpoint::Impl::claim(const std::shared_ptr<Group>& g,
                              const std::shared_ptr<Incoming>& in) {
  const int from = static_cast<int>(in->hello.from_rank);
  if (static_cast<int>(in->hello.to_rank) != g->rank ||
      static_cast<int>(in->hello.group_size) != g->size || from >= g->rank) {
    return refuse(in, "mismatch",
                  claim_text(in) + " dialing rank " + std::to_string(in->hello.to_rank) + " of " +
                      std::to_string(in->hello.group_size) + ", but we are rank " +
                      std::to_string(g->rank) + " of " + std::to_string(g->size),
                  RejectReason::kGroupMismatch);
  }
  const bool tls = g->tls[from];
  const bool certificates = tls && tls_context_ && tls_context_->uses_certificates();
  if (in->hello.tls != tls || in->hello.tls_certificates != certificates) {
    // Both ends decided from their own configuration and the same view: a difference is
    // a configuration error no retry fixes, so the group fails now rather than at its
    // deadline (the peer proved the secret, so this is not a stranger's doing).
    const std::string why = "TLS mode mismatch with rank " + std::to_string(from) + " at " +
                            in->peer + ": the peer wants " +
                            tls_text(in->hello.tls, in->hello.tls_certificates) +
                            " on this pair, this member " + tls_text(tls, certificates) +
                            " (--tls " + std::string(tls_mode_name(config_.tls.mode)) +
                            "; give every member the same --tls and keys)";
    refuse(in, "tls", why, RejectReason::kTlsMismatch);
    config_.log.warn("epoch " + std::to_string(g->epoch) + ": " + why);
    const std::shared_ptr<Group> group = g;  // a copy: `g` may be group_, which finish() resets
    return finish(group, error(StatusCode::kMismatch, why));
  }
  Slot& slot = g->slots[from];
  if (slot.sock || slot.busy) {
    return refuse(in, "mismatch", claim_text(in) + ", already connected",
                  RejectReason::kGroupMismatch);
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
                      // Named as the peer advertises itself (its ephemeral port means nothing).
                      s.address = g->addresses[from].empty() ? in->peer : g->addresses[from][0];
                      s.tls = g->tls[from];
                      if (s.tls) s.psk = handshake_tls_psk(config_.secret, in->hello, in->nonce);
                      s.sock.emplace(std::move(in->sock));
                      maybe_complete(g);
                    });
}

void TcpEndpoint::Impl::dial(const std::shared_ptr<Group>& g, int peer) {
  if (g->finished) return;
  const std::size_t index = g->slots[peer].next;
  auto sock = std::make_shared<tcp::socket>(io_);
  g->dialing.push_back(sock);
  // An address that drops packets would hold the attempt for the kernel's SYN retries
  // (minutes), one that accepts and stays silent until the group's deadline: the next
  // address gets its turn after connect_attempt_timeout instead.
  Slot& slot = g->slots[peer];
  slot.attempt_expired = false;
  slot.attempt_timer = std::make_shared<asio::steady_timer>(io_, config_.connect_attempt_timeout);
  slot.attempt_timer->async_wait([g, peer, sock](std::error_code ec) {
    if (ec || g->finished) return;
    g->slots[peer].attempt_expired = true;
    sock->close(ec);
  });
  sock->async_connect(g->dial[peer][index], [this, g, peer, sock, index](std::error_code ec) {
    if (g->finished) return;
    if (ec) return redial(g, peer, sock, "cannot connect: " + ec.message());
    g->slots[peer].address = g->addresses[peer][index];
    on_connected(g, peer, sock);
  });
}

void TcpEndpoint::Impl::on_connected(const std::shared_ptr<Group>& g, int peer,
                                     const std::shared_ptr<tcp::socket>& sock) {
  configure(*sock);
  HandshakeMessage hello;
  hello.type = HandshakeType::kHello;
  hello.epoch = g->epoch;
  hello.from_rank = static_cast<std::uint32_t>(g->rank);
  hello.to_rank = static_cast<std::uint32_t>(peer);
  hello.group_size = static_cast<std::uint32_t>(g->size);
  hello.tls = g->tls[peer];
  hello.tls_certificates = hello.tls && tls_context_ && tls_context_->uses_certificates();
  hello.nonce = random_nonce();
  auto buf = std::make_shared<HandshakeBytes>(encode_handshake(hello));
  asio::async_write(*sock, asio::buffer(*buf),
                    [this, g, peer, sock, buf, hello](std::error_code ec2, std::size_t) {
                      if (g->finished) return;
                      if (ec2) return redial(g, peer, sock, "handshake failed: " + ec2.message());
                      asio::async_read(
                          *sock, asio::buffer(*buf),
                          [this, g, peer, sock, buf, hello](std::error_code ec3, std::size_t) {
                            if (g->finished) return;
                            if (ec3)
                              return redial(g, peer, sock, "handshake failed: " + ec3.message());
                            on_challenge(g, peer, sock, buf, hello);
                          });
                    });
}

void TcpEndpoint::Impl::on_challenge(const std::shared_ptr<Group>& g, int peer,
                                     const std::shared_ptr<tcp::socket>& sock,
                                     const std::shared_ptr<HandshakeBytes>& buf,
                                     const HandshakeMessage& hello) {
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
              Slot& slot = g->slots[peer];
              slot.attempt_timer->cancel();
              if (slot.next > 0) {
                config_.log.info("epoch " + std::to_string(g->epoch) + ": rank " +
                                 std::to_string(peer) + " reached on " + slot.address +
                                 " after its preferred address(es) failed: " + slot.last_error);
              }
              slot.tls = hello.tls;
              if (slot.tls) {
                slot.psk = handshake_tls_psk(config_.secret, hello, acceptor_nonce);
              }
              slot.sock.emplace(std::move(*sock));
              maybe_complete(g);
            });
      });
}

void TcpEndpoint::Impl::on_reject(const std::shared_ptr<Group>& g, int peer,
                                  const std::shared_ptr<tcp::socket>& sock,
                                  const HandshakeMessage& m) {
  switch (m.reason) {
    case RejectReason::kAuth:
      return fail_dial(g, peer, sock, StatusCode::kAuthFailed, "rejected our secret");
    case RejectReason::kStaleEpoch:
      return fail_dial(g, peer, sock, StatusCode::kStaleEpoch,
                       "refused epoch " + std::to_string(g->epoch) + ": it has moved on to epoch " +
                           std::to_string(m.epoch));
    case RejectReason::kBusy: return redial(g, peer, sock, "is busy");
    case RejectReason::kTlsMismatch:
      return fail_dial(g, peer, sock, StatusCode::kMismatch,
                       "refused the connection: TLS mode mismatch (this member wants " +
                           tls_text(g->tls[peer], g->tls[peer] && tls_context_ &&
                                                       tls_context_->uses_certificates()) +
                           " on this pair with --tls " +
                           std::string(tls_mode_name(config_.tls.mode)) +
                           ", the peer decided otherwise: give every member the same --tls and "
                           "keys)");
    default:
      return fail_dial(g, peer, sock, StatusCode::kMismatch,
                       "refused the connection: " + std::string(reason_text(m.reason)));
  }
}

void TcpEndpoint::Impl::redial(const std::shared_ptr<Group>& g, int peer,
                               const std::shared_ptr<tcp::socket>& sock, std::string why) {
  std::error_code ec;
  sock->close(ec);
  std::erase(g->dialing, sock);
  Slot& slot = g->slots[peer];
  if (slot.attempt_timer) slot.attempt_timer->cancel();
  if (slot.attempt_expired) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(config_.connect_attempt_timeout);
    why = "no authenticated connection within " + std::to_string(ms.count()) + " ms";
  }
  const std::vector<std::string>& addresses = g->addresses[peer];
  slot.address_errors[slot.next] = addresses[slot.next] + ": " + why;
  slot.last_error.clear();
  for (const std::string& e : slot.address_errors) {
    if (!e.empty()) slot.last_error += (slot.last_error.empty() ? "" : "; ") + e;
  }
  slot.next = (slot.next + 1) % addresses.size();
  if (slot.next != 0) {
    asio::post(io_, [this, g, peer] { dial(g, peer); });
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(io_, kRetryInterval);
  timer->async_wait([this, g, peer, timer](std::error_code) { dial(g, peer); });
}

void TcpEndpoint::Impl::fail_dial(const std::shared_ptr<Group>& g, int peer,
                                  const std::shared_ptr<tcp::socket>& sock, StatusCode code,
                                  const std::string& why) {
  std::error_code ec;
  sock->close(ec);
  std::erase(g->dialing, sock);
  const std::string line =
      "rank " + std::to_string(peer) + " at " + g->slots[peer].address + " " + why;
  config_.log.warn("epoch " + std::to_string(g->epoch) + ": " + line);
  finish(g, error(code, line));
}

}  // namespace tributary::transport
