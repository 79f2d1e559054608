// The endpoint's lifecycle (listening, shutting down, statistics) and the building of
// each epoch's group on the I/O thread; the handshakes it runs are in tcp_handshake.cc.
#include "transport/tcp/tcp_endpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "transport/tcp/host_port.h"
#include "transport/tcp/tcp_endpoint_impl.h"

namespace tributary::transport {
namespace {

std::string joined(const std::vector<std::string>& addresses) {
  std::string out;
  for (const std::string& a : addresses) out += (out.empty() ? "" : " / ") + a;
  return out;
}

}  // namespace

TcpEndpoint::Impl::~Impl() {
  asio::post(io_, [this] {
    std::error_code ec;
    acceptor_.close(ec);
    accept_timer_.cancel();
    log_flush_timer_.cancel();
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

Status TcpEndpoint::Impl::start() {
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
  flush_log_periodically();
  thread_ = std::thread([this] { io_.run(); });
  return Status();
}

TcpEndpointStats TcpEndpoint::Impl::stats() const {
  TcpEndpointStats s;
  std::lock_guard lock(stats_mu_);
  s.epoch = stats_epoch_;
  s.frames_dropped_stale_epoch = retired_stale_;
  s.bad_frames = retired_bad_;
  s.crc_failures = retired_crc_;
  s.unexpected_stalls = retired_stalls_;
  s.bytes_copied_unexpected = retired_copied_;
  if (counters_) {
    for (std::size_t r = 0; r < counters_->peers.size(); ++r) {
      if (static_cast<int>(r) == stats_rank_) continue;
      const auto& c = counters_->peers[r];
      s.peers.push_back(TcpPeerStats{static_cast<int>(r), stats_addresses_[r], c.bytes_sent.load(),
                                     c.bytes_received.load(), c.frames_sent.load(),
                                     c.frames_received.load()});
    }
    s.frames_dropped_stale_epoch += counters_->frames_dropped_stale_epoch.load();
    s.bad_frames += counters_->bad_frames.load();
    s.crc_failures += counters_->crc_failures.load();
    s.unexpected_stalls += counters_->unexpected_stalls.load();
    s.bytes_copied_unexpected += counters_->bytes_copied_unexpected.load();
  }
  s.handshakes_accepted = handshakes_accepted_.load();
  s.handshakes_rejected = handshakes_rejected_.load();
  s.connections_parked = parked_count_.load();
  s.tls_failures = tls_failures_.load();
  s.tls_peers = tls_peers_.load();
  return s;
}

void TcpEndpoint::Impl::configure(tcp::socket& s) {
  std::error_code ec;
  s.set_option(tcp::no_delay(true), ec);
  if (config_.socket_buffer_bytes > 0) {
    s.set_option(asio::socket_base::send_buffer_size(config_.socket_buffer_bytes), ec);
    s.set_option(asio::socket_base::receive_buffer_size(config_.socket_buffer_bytes), ec);
  }
}

void TcpEndpoint::Impl::begin(const std::shared_ptr<Group>& g) {
  if (const std::uint64_t newer = cancel_below_.load(); g->epoch < newer) {
    return finish(g,
                  error(StatusCode::kAborted, "connecting view " + std::to_string(g->epoch) +
                                                  " superseded by view " + std::to_string(newer)));
  }
  if (finish_if_given_up(g)) return;
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
    if (epoch == g->epoch && from >= 0 && from < g->size && !g->wanted[from]) {
      ++it;  // a reconnect of other pairs: this one waits for its own call
      continue;
    }
    std::shared_ptr<Incoming> in = std::move(it->second);
    it = parked_.erase(it);
    if (epoch < g->epoch) {
      config_.log.info("dropping parked connection from " + in->peer + " of stale epoch " +
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
  for (int peer = g->rank + 1; peer < g->size; ++peer) {
    if (g->wanted[peer]) dial(g, peer);
  }
  maybe_complete(g);
}

void TcpEndpoint::Impl::on_deadline(const std::shared_ptr<Group>& g) {
  if (g->partial) {
    for (int r = 0; r < g->size; ++r) {
      if (g->wanted[r] && g->slots[r].sock) return finish(g, Status());
    }
  }
  bool auth = false;
  const std::string missing = describe_missing(*g, &auth);
  finish(g, error(auth ? StatusCode::kAuthFailed : StatusCode::kTimedOut,
                  "epoch " + std::to_string(g->epoch) +
                      " group not complete by the deadline: " + missing));
}

std::string TcpEndpoint::Impl::describe_missing(const Group& g, bool* auth) const {
  std::string missing;
  for (int r = 0; r < g.size; ++r) {
    const Slot& s = g.slots[r];
    if (r == g.rank || !g.wanted[r] || s.sock) continue;
    if (!missing.empty()) missing += "; ";
    missing += "rank " + std::to_string(r) + " at " + joined(g.addresses[r]);
    missing += r < g.rank ? " never connected to us" : " not connected";
    if (auto it = auth_failures_.find({g.epoch, r}); it != auth_failures_.end()) {
      missing += " (" + it->second + ")";
      if (auth != nullptr) *auth = true;
    } else if (!s.last_error.empty()) {
      missing += " (" + s.last_error + ")";
    }
  }
  return missing;
}

void TcpEndpoint::Impl::maybe_complete(const std::shared_ptr<Group>& g) {
  for (int r = 0; r < g->size; ++r) {
    if (g->wanted[r] && !g->slots[r].sock) return;
  }
  finish(g, Status());
}

// Ends a connect_group still in progress for an epoch older than `newer`, with kAborted:
// a newer view made it moot, and its missing peer may be gone for good.
void TcpEndpoint::Impl::cancel_connect(std::uint64_t newer) {
  // Remembered, so that a connect_group that has not reached the I/O thread yet is
  // cancelled too (begin() checks it).
  std::uint64_t seen = cancel_below_.load();
  while (seen < newer && !cancel_below_.compare_exchange_weak(seen, newer)) {
  }
  asio::post(io_, [this, newer] {
    // A copy: finish() resets group_, which must not pull the group out from under it.
    if (const std::shared_ptr<Group> g = group_; g && g->epoch < newer) {
      // What it still lacked says why (a peer that was dialled in vain, refused, ...).
      const std::string missing = describe_missing(*g, nullptr);
      finish(g, error(StatusCode::kAborted,
                      "connecting view " + std::to_string(g->epoch) + " superseded by view " +
                          std::to_string(newer) +
                          (missing.empty() ? "" : " (it still lacked " + missing + ")")));
    }
  });
}

// Ends the connect_group (not a reconnect) of exactly `epoch`, in progress or still to
// begin, with kAborted; reconnects of that epoch are still answered.
void TcpEndpoint::Impl::cancel_group(std::uint64_t epoch) {
  cancel_epoch_.store(epoch);
  asio::post(io_, [this] {
    // A copy: finish() resets group_.
    if (const std::shared_ptr<Group> g = group_) finish_if_given_up(g);
  });
}

bool TcpEndpoint::Impl::finish_if_given_up(const std::shared_ptr<Group>& g) {
  if (g->partial || cancel_epoch_.load() != g->epoch) return false;
  finish(g, error(StatusCode::kAborted, "connecting epoch " + std::to_string(g->epoch) +
                                            " given up"));
  return true;
}

void TcpEndpoint::Impl::finish(const std::shared_ptr<Group>& g, Status st) {
  if (g->finished) return;
  g->finished = true;
  if (group_ == g) group_.reset();
  if (g->deadline_timer) g->deadline_timer->cancel();
  std::error_code ec;
  for (auto& s : g->dialing) s->close(ec);
  g->dialing.clear();
  for (Slot& slot : g->slots) {
    if (slot.attempt_timer) slot.attempt_timer->cancel();  // its handler holds the group
  }
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
        sockets.push_back(PeerSocket{r, fd, slot.address, nullptr});
        if (slot.tls) {
          // The dialer (the lower rank) is the TLS client.
          auto stream = TlsStream::create(tls_context_, fd, r > g->rank, slot.psk);
          if (stream.is_ok()) {
            sockets.back().tls = std::move(*stream);
          } else {
            st = stream.status();
          }
        }
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

Result<std::vector<PeerSocket>> TcpEndpoint::Impl::connect_sockets(
    std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
    Deadline deadline, std::vector<bool> tls, const std::vector<int>& peers, bool partial) {
  const int size = static_cast<int>(addresses.size());
  if (size < 1 || rank < 0 || rank >= size) {
    return error(StatusCode::kInvalidArgument,
                 "rank " + std::to_string(rank) + " in a group of " + std::to_string(size));
  }
  std::vector<bool> wanted(static_cast<std::size_t>(size), peers.empty());
  for (int peer : peers) {
    if (peer < 0 || peer >= size || peer == rank) {
      return error(StatusCode::kInvalidArgument, "peer " + std::to_string(peer) +
                                                     " in a group of " + std::to_string(size));
    }
    wanted[static_cast<std::size_t>(peer)] = true;
  }
  wanted[static_cast<std::size_t>(rank)] = false;
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
  g->tls = std::move(tls);
  g->tls.resize(static_cast<std::size_t>(size), false);
  g->slots.resize(static_cast<std::size_t>(size));
  g->dial.resize(static_cast<std::size_t>(size));
  g->deadline = deadline;
  g->wanted = std::move(wanted);
  g->partial = partial;
  {
    // Resolve up front so a typo fails at once instead of at the deadline.
    asio::io_context resolve_io;
    tcp::resolver resolver(resolve_io);
    for (int peer = rank + 1; peer < size; ++peer) {
      if (!g->wanted[peer]) continue;
      if (addresses[peer].empty()) {
        return error(StatusCode::kInvalidArgument, "no address for rank " + std::to_string(peer));
      }
      for (const std::string& address : addresses[peer]) {
        std::string host, port;
        if (!split_host_port(address, &host, &port)) {
          return error(StatusCode::kInvalidArgument, "bad address '" + address + "' for rank " +
                                                         std::to_string(peer) +
                                                         " (want host:port)");
        }
        std::error_code ec;
        auto results = resolver.resolve(host, port, tcp::resolver::numeric_service, ec);
        if (ec || results.empty()) {
          return error(StatusCode::kInvalidArgument, "cannot resolve '" + address + "' for rank " +
                                                         std::to_string(peer) + ": " +
                                                         ec.message());
        }
        g->dial[peer].push_back(results.begin()->endpoint());
      }
      g->slots[peer].address_errors.resize(addresses[peer].size());
    }
  }
  asio::post(io_, [this, g] { begin(g); });
  std::unique_lock lock(g->mu);
  g->cv.wait(lock, [&] { return g->done; });
  if (!g->result.is_ok()) return g->result;
  return std::move(g->sockets);
}

std::vector<bool> TcpEndpoint::Impl::tls_pairs(int rank, int size,
                                               const std::vector<std::string>& zones) const {
  std::vector<bool> out(static_cast<std::size_t>(std::max(size, 0)), false);
  if (config_.tls.mode == TlsMode::kOff) return out;
  auto zone = [&](int r) {
    return r < static_cast<int>(zones.size()) ? std::string_view(zones[r]) : std::string_view();
  };
  for (int r = 0; r < size; ++r) out[r] = r != rank && tls_between(config_.tls.mode, zone(rank), zone(r));
  return out;
}

Status TcpEndpoint::Impl::establish_tls(std::uint64_t epoch, std::vector<PeerSocket>& sockets,
                                        Deadline deadline, bool group) {
  std::vector<TlsHandshake> handshakes;
  for (const PeerSocket& s : sockets) {
    if (s.tls) {
      handshakes.push_back({s.tls.get(), s.fd, "rank " + std::to_string(s.rank) + " at " + s.address, Status()});
    }
  }
  if (group) tls_peers_.store(handshakes.size());
  if (handshakes.empty()) return Status();
  // The handshake's own bound applies on top of the group's: a peer that stops answering
  // mid-handshake is one that will not answer.
  const Deadline bound = Deadline::after(config_.handshake_timeout);
  const Status st = run_tls_handshakes(handshakes, bound.at < deadline.at ? bound : deadline);
  std::string peers;
  for (const TlsHandshake& h : handshakes) {
    if (h.status.is_ok()) {
      peers += (peers.empty() ? "" : ", ") + h.peer;
      continue;
    }
    tls_failures_.fetch_add(1);
    config_.log.warn("epoch " + std::to_string(epoch) + ": " + h.status.message());
  }
  if (st.is_ok()) {
    config_.log.info("epoch " + std::to_string(epoch) + ": TLS 1.3 " +
                     handshakes.front().stream->description() + " with " + peers);
  }
  return st;
}

Status TcpEndpoint::Impl::prepare(std::uint64_t epoch, std::vector<PeerSocket>& sockets,
                                  Deadline deadline, bool group) {
  for (const PeerSocket& s : sockets) {
    const int flags = ::fcntl(s.fd, F_GETFL);
    if (flags < 0 || ::fcntl(s.fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      const int err = errno;
      for (PeerSocket& p : sockets) {
        p.tls.reset();
        ::close(p.fd);
      }
      return error(StatusCode::kInternal, "cannot make the socket of rank " +
                                              std::to_string(s.rank) +
                                              " non-blocking: " + std::strerror(err));
    }
  }
  if (Status tls = establish_tls(epoch, sockets, deadline, group); !tls.is_ok()) {
    for (PeerSocket& p : sockets) {
      p.tls.reset();
      ::close(p.fd);
    }
    return tls;
  }
  return Status();
}

Result<std::unique_ptr<algorithms::Link>> TcpEndpoint::Impl::make_link(
    std::uint64_t epoch, int rank, int size, std::vector<PeerSocket> sockets, Deadline deadline,
    TcpGroupOptions options, Status unconnected, const std::vector<std::string>& names) {
  std::vector<std::string> addresses(names);
  addresses.resize(static_cast<std::size_t>(size));
  for (const PeerSocket& s : sockets) addresses[s.rank] = s.address;
  auto counters = std::make_shared<LinkCounters>(size);
  {
    std::lock_guard stats_lock(stats_mu_);
    if (counters_) {
      retired_stale_ += counters_->frames_dropped_stale_epoch.load();
      retired_bad_ += counters_->bad_frames.load();
      retired_crc_ += counters_->crc_failures.load();
      retired_stalls_ += counters_->unexpected_stalls.load();
      retired_copied_ += counters_->bytes_copied_unexpected.load();
    }
    counters_ = counters;
    stats_addresses_ = std::move(addresses);
    stats_rank_ = rank;
    stats_epoch_ = epoch;
  }
  TRIB_RETURN_IF_ERROR(prepare(epoch, sockets, deadline, true));
  TcpLinkParams params;
  params.epoch = epoch;
  params.rank = rank;
  params.size = size;
  params.max_frame_bytes = config_.max_frame_bytes;
  params.max_unexpected_bytes = config_.max_unexpected_bytes;
  params.busy_poll = config_.busy_poll;
  params.yield_while_spinning = !options.core_per_rank;
  if (options.core_per_rank) params.same_host_congestion = config_.same_host_congestion;
  params.combine = options.combine;
  params.log = config_.log;
  params.counters = std::move(counters);
  params.unconnected = std::move(unconnected);
  return make_tcp_link(std::move(params), std::move(sockets));
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
  TRIB_RETURN_IF_ERROR(validate_tls_config(config.tls));
  std::shared_ptr<TlsContext> tls;
  if (config.tls.mode != TlsMode::kOff) {
    TRIB_ASSIGN_OR_RETURN(tls, TlsContext::create(config.tls));
  }
  auto impl = std::make_unique<Impl>(config, std::move(tls));
  TRIB_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<TcpEndpoint>(new TcpEndpoint(std::move(impl)));
}

std::uint16_t TcpEndpoint::port() const { return impl_->port(); }
std::string TcpEndpoint::address() const { return impl_->address(); }

Result<std::unique_ptr<algorithms::Link>> TcpEndpoint::connect_group(
    std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
    Deadline deadline, const std::vector<std::string>& zones, TcpGroupOptions options) {
  const int size = static_cast<int>(addresses.size());
  TRIB_ASSIGN_OR_RETURN(
      std::vector<PeerSocket> sockets,
      impl_->connect_sockets(epoch, rank, addresses, deadline, impl_->tls_pairs(rank, size, zones)));
  return impl_->make_link(epoch, rank, size, std::move(sockets), deadline, options);
}

Result<TcpEndpoint::SplitGroup> TcpEndpoint::connect_split(
    std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
    const std::vector<bool>& borrowed, Status why, Deadline deadline,
    const std::vector<std::string>& zones, TcpGroupOptions options) {
  const int size = static_cast<int>(addresses.size());
  if (borrowed.size() != addresses.size()) {
    return error(StatusCode::kInvalidArgument, "connect_split: " + std::to_string(borrowed.size()) +
                                                   " marks for " + std::to_string(size) + " ranks");
  }
  std::vector<bool> tls = impl_->tls_pairs(rank, size, zones);
  tls.resize(static_cast<std::size_t>(size), false);
  for (std::size_t r = 0; r < borrowed.size(); ++r) {
    if (borrowed[r]) tls[r] = false;  // the other transport's bytes never cross the network
  }
  TRIB_ASSIGN_OR_RETURN(std::vector<PeerSocket> sockets,
                        impl_->connect_sockets(epoch, rank, addresses, deadline, std::move(tls)));
  SplitGroup out;
  std::vector<PeerSocket> mine;
  for (PeerSocket& s : sockets) {
    (borrowed[static_cast<std::size_t>(s.rank)] ? out.borrowed : mine).push_back(std::move(s));
  }
  if (why.is_ok()) why = error(StatusCode::kPeerLost, "not connected");
  std::vector<std::string> names;
  for (const auto& a : addresses) names.push_back(a.empty() ? std::string() : a.front());
  auto link = impl_->make_link(epoch, rank, size, std::move(mine), deadline, options,
                               std::move(why), names);
  if (!link.is_ok()) {
    for (PeerSocket& s : out.borrowed) ::close(s.fd);
    return link.status();
  }
  out.link = std::move(*link);
  return out;
}

Result<std::unique_ptr<algorithms::Link>> TcpEndpoint::unconnected_link(
    std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
    Status why, TcpGroupOptions options) {
  const int size = static_cast<int>(addresses.size());
  if (rank < 0 || rank >= size) return error(StatusCode::kInvalidArgument, "bad rank");
  if (why.is_ok()) why = error(StatusCode::kPeerLost, "not connected");
  std::vector<std::string> names;
  for (const auto& a : addresses) names.push_back(a.empty() ? std::string() : a.front());
  return impl_->make_link(epoch, rank, size, {}, Deadline::after(std::chrono::seconds(1)), options,
                          std::move(why), names);
}

Result<std::unique_ptr<algorithms::Link>> TcpEndpoint::connect_group(
    std::uint64_t epoch, int rank, const std::vector<std::string>& addresses, Deadline deadline,
    const std::vector<std::string>& zones) {
  std::vector<std::vector<std::string>> paths;
  paths.reserve(addresses.size());
  for (const std::string& a : addresses) paths.push_back({a});
  return connect_group(epoch, rank, paths, deadline, zones);
}

Result<std::vector<PeerSocket>> TcpEndpoint::connect_sockets(
    std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
    Deadline deadline) {
  return impl_->connect_sockets(epoch, rank, addresses, deadline);
}

Result<std::vector<PeerSocket>> TcpEndpoint::reconnect(
    std::uint64_t epoch, int rank, const std::vector<std::vector<std::string>>& addresses,
    const std::vector<int>& peers, Deadline deadline, const std::vector<std::string>& zones) {
  if (peers.empty()) return error(StatusCode::kInvalidArgument, "a reconnect of no peer");
  const int size = static_cast<int>(addresses.size());
  TRIB_ASSIGN_OR_RETURN(std::vector<PeerSocket> sockets,
                        impl_->connect_sockets(epoch, rank, addresses, deadline,
                                               impl_->tls_pairs(rank, size, zones), peers, true));
  TRIB_RETURN_IF_ERROR(impl_->prepare(epoch, sockets, deadline, false));
  return sockets;
}

void TcpEndpoint::cancel_connect(std::uint64_t newer_epoch) { impl_->cancel_connect(newer_epoch); }

void TcpEndpoint::cancel_group(std::uint64_t epoch) { impl_->cancel_group(epoch); }

TcpEndpointStats TcpEndpoint::stats() const { return impl_->stats(); }

}  // namespace tributary::transport
