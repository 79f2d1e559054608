#include "agent/data_plane.h"

#include <algorithm>
#include <charconv>
#include <future>

#include "agent/worker.h"
#include "transport/absent_path.h"
#include "transport/failover_link.h"
#include "transport/rdma_transport.h"
#include "transport/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace tributary::agent {
namespace {

bool valid_port(std::string_view text) {
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  return ec == std::errc{} && ptr == text.data() + text.size() && port > 0 && port <= 65535;
}

}  // namespace

Result<std::string> complete_address(const std::string& address, std::uint16_t port) {
  auto bad = [&] {
    return error(StatusCode::kInvalidArgument,
                 "--data-address '" + address + "': want host[:port] or [v6][:port]");
  };
  if (address.empty()) return bad();
  const std::string with_port = std::string(1, ':').append(std::to_string(port));
  if (address.front() == '[') {
    const auto close = address.find(']');
    if (close == std::string::npos || close < 2) return bad();
    if (close + 1 == address.size()) return address + with_port;
    if (address[close + 1] != ':' || !valid_port(address.substr(close + 2))) return bad();
    return address;
  }
  const auto colons = std::count(address.begin(), address.end(), ':');
  if (colons == 0) return address + with_port;
  if (colons > 1) {  // a bare IPv6 address
    std::string bracketed(1, '[');
    bracketed.append(address).append("]").append(with_port);
    return bracketed;
  }
  const auto colon = address.find(':');
  if (colon == 0 || !valid_port(address.substr(colon + 1))) return bad();
  return address;
}

Result<TransportChoice> parse_transport_choice(std::string_view text) {
  if (text == "auto") return TransportChoice::kAuto;
  if (text == "tcp") return TransportChoice::kTcp;
  if (text == "shm") return TransportChoice::kShm;
  if (text == "rdma") return TransportChoice::kRdma;
  return error(StatusCode::kInvalidArgument,
               "--transport '" + std::string(text) + "': want auto, shm, rdma or tcp");
}

std::string_view to_string(TransportChoice choice) {
  switch (choice) {
    case TransportChoice::kAuto: return "auto";
    case TransportChoice::kTcp: return "tcp";
    case TransportChoice::kShm: return "shm";
    case TransportChoice::kRdma: return "rdma";
  }
  return "auto";
}

Result<DataPlaneConfig> DataPlaneConfig::of(const WorkerConfig& config) {
  DataPlaneConfig c;
  c.secret = config.secret;
  c.bind_host = config.bind_host;
  c.data_port = config.data_port;
  c.advertise_host = config.advertise_host;
  c.data_addresses = config.data_addresses;
  TRIB_ASSIGN_OR_RETURN(c.transport, parse_transport_choice(config.transport));
  c.shm_ring_bytes = config.shm_ring_bytes;
  c.fused_receive = config.fused_receive;
  c.shm_single_copy = config.shm_single_copy;
  c.failover = config.failover;
  c.stall_timeout = config.stall_timeout;
  c.connect_attempt_timeout = config.connect_attempt_timeout;
  c.tls = config.tls;
  return c;
}

Result<std::unique_ptr<DataPlane>> DataPlane::start(const DataPlaneConfig& config, Logger log) {
  using Choice = TransportChoice;
  if (config.transport == Choice::kRdma && !transport::rdma_verbs_built()) {
    return error(StatusCode::kInvalidArgument,
                 "--transport rdma: this build has no RDMA support (built without libibverbs)");
  }
  const bool tls = config.tls.mode != transport::TlsMode::kOff;
  if (tls && config.transport == Choice::kRdma) {
    return error(StatusCode::kInvalidArgument,
                 "--transport rdma with --tls " + std::string(transport::tls_mode_name(config.tls.mode)) +
                     ": RDMA traffic cannot be encrypted; use --transport auto or tcp");
  }
  std::unique_ptr<DataPlane> d(new DataPlane());
  d->tls_ = config.tls;
  d->log_ = log;
  transport::TcpEndpointConfig ec;
  ec.bind_host = config.bind_host;
  ec.port = config.data_port;
  ec.secret = config.secret;
  ec.connect_attempt_timeout = config.connect_attempt_timeout;
  ec.tls = config.tls;
  ec.log = log;
  TRIB_ASSIGN_OR_RETURN(d->endpoint_, transport::TcpEndpoint::listen(ec));
  const std::uint16_t port = d->endpoint_->port();
  if (config.data_addresses.empty()) {
    d->addresses_.push_back(config.advertise_host.empty()
                                ? d->endpoint_->address()
                                : config.advertise_host + ":" + std::to_string(port));
  }
  for (const std::string& a : config.data_addresses) {
    TRIB_ASSIGN_OR_RETURN(std::string full, complete_address(a, port));
    d->addresses_.push_back(std::move(full));
  }
  d->redialer_ = std::make_unique<PathRedialer>(log.child("redial"));
  auto tcp = std::make_unique<transport::TcpTransport>(*d->endpoint_, d->addresses_, "tcp",
                                            config.fused_receive);
  std::vector<std::unique_ptr<transport::Transport>> ordered;
  if (config.transport == Choice::kAuto || config.transport == Choice::kShm) {
    transport::ShmTransportConfig sc;
    sc.ring_bytes = config.shm_ring_bytes;
    sc.combine = config.fused_receive;
    sc.single_copy = config.shm_single_copy;
    sc.log = log;
    auto shm = std::make_unique<transport::ShmTransport>(sc, *tcp);
    d->shm_ = shm.get();
    ordered.push_back(std::move(shm));
  }
  // RDMA between shared memory and TCP: in a build with libibverbs; it advertises only
  // when a device with an active port was opened.
  if (tls && config.transport == Choice::kAuto && transport::rdma_verbs_built()) {
    log.info("rdma not advertised: --tls " + std::string(transport::tls_mode_name(config.tls.mode)) +
             " encrypts TCP only");
  } else if ((config.transport == Choice::kAuto && transport::rdma_verbs_built()) ||
             config.transport == Choice::kRdma) {
    auto device = transport::open_rdma_device();
    if (!device.is_ok() && config.transport == Choice::kRdma) {
      log.warn("--transport rdma: " + device.status().message() + ": no group can connect");
    } else if (!device.is_ok()) {
      log.info("rdma not advertised: " + device.status().message());
    }
    transport::RdmaTransportConfig rc;
    rc.log = log;
    auto rdma = std::make_unique<transport::RdmaTransport>(rc, *tcp, std::move(device));
    d->rdma_ = rdma.get();
    ordered.push_back(std::move(rdma));
  }
  // TCP stays in the table under "shm" and "rdma" too: those set themselves up over its
  // connections. It carries no group there, because it does not advertise.
  if (config.transport == Choice::kShm || config.transport == Choice::kRdma) {
    d->table_ = std::make_unique<transport::TransportTable>(std::move(ordered), log);
    d->tcp_only_channels_ = std::move(tcp);
  } else {
    d->tcp_ = tcp.get();
    ordered.push_back(std::move(tcp));
    d->table_ = std::make_unique<transport::TransportTable>(std::move(ordered), log);
  }
  // auto: a standby only where there is another network to fall back to (a second data
  // address; RDMA, whose standby is TCP). Over a single network a standby is a second
  // connection on the same wire, worth its cost only when asked for (--failover).
  // (An RDMA transport in the table without a device advertises nothing: no network.)
  const bool rdma_device = d->rdma_ != nullptr && !d->rdma_->advertise().empty();
  const bool another_network = d->addresses_.size() >= 2 || rdma_device;
  d->failover_ = config.failover;
  // Also for a group that mixes transports without a standby (its pairs' paths are [shared
  // memory, TCP]).
  d->stall_timeout_ = config.stall_timeout;
  if (config.failover == transport::PathChoice::kOn ||
      (config.failover == transport::PathChoice::kAuto && another_network)) {
    // A standby listener per data address but the first (same hosts, its own port); the
    // first standby also lists the other addresses after its own, as connect-time
    // fallbacks, so that with two addresses it is exactly one standby, over the second
    // network when it connects.
    const std::size_t count = std::max<std::size_t>(1, d->addresses_.size() - 1);
    for (std::size_t k = 0; k < count; ++k) {
      ec.port = 0;
      TRIB_ASSIGN_OR_RETURN(auto endpoint, transport::TcpEndpoint::listen(ec));
      const std::string port = std::to_string(endpoint->port());
      std::vector<std::string> addresses;
      for (const std::string& a : d->addresses_) {
        addresses.push_back(a.substr(0, a.rfind(':') + 1) + port);
      }
      if (addresses.size() > 1) {
        std::rotate(addresses.begin(), addresses.begin() + 1 + static_cast<std::ptrdiff_t>(k),
                    addresses.end());
        if (k > 0) addresses.resize(1);  // the later standbys: their own network only
      }
      d->standbys_.push_back(
          std::make_unique<transport::TcpTransport>(*endpoint, std::move(addresses), standby_name(k)));
      d->standby_endpoints_.push_back(std::move(endpoint));
    }
  }
  return d;
}

DataPlane::~DataPlane() {
  redialer_.reset();  // its attempts use the endpoints
  table_.reset();  // its transports use the endpoint
  tcp_only_channels_.reset();
  standbys_.clear();
}

namespace {

std::string standby_list(std::size_t count) {
  std::string out;
  for (std::size_t k = 0; k < count; ++k) out += (k == 0 ? "" : ", ") + standby_name(k);
  return out;
}

}  // namespace

std::string standby_name(std::size_t k) {
  return k == 0 ? "tcp-standby" : "tcp-standby-" + std::to_string(k + 1);
}

std::vector<std::string> DataPlane::capabilities() const {
  std::vector<std::string> out = table_->advertise();
  // A setting every member must share (membership::kSharedSettings): the coordinator refuses
  // a joiner whose TLS differs instead of admitting one whose links all fail.
  const transport::TlsConfig& tls = tls_;
  out.push_back("tls:" + std::string(transport::tls_mode_name(tls.mode)) +
                (tls.mode == transport::TlsMode::kOff ? "" : tls.uses_certificates() ? "/cert" : "/psk"));
  for (const auto& standby : standbys_) {
    for (std::string& s : standby->advertise()) out.push_back(std::move(s));
  }
  return out;
}

void DataPlane::cancel_connect(std::uint64_t newer_epoch) {
  // Also ends a reconnect of an older epoch's path in progress on these endpoints.
  table_->cancel_connect(newer_epoch);
  for (const auto& standby : standbys_) standby->cancel_connect(newer_epoch);
}

std::uint16_t DataPlane::port() const { return endpoint_->port(); }

Result<std::unique_ptr<algorithms::Link>> DataPlane::connect(const transport::GroupSpec& spec,
                                                             Deadline deadline) {
  // The last group's reconnects end here: an endpoint connects one group at a time.
  redialer_->stop();
  // The standbys every member advertises, in order (the view decides it, so every member
  // counts the same: a standby missing from one member ends the list for the group).
  std::size_t standbys = spec.size() > 1 ? standbys_.size() : 0;
  for (std::size_t k = 0; k < standbys; ++k) {
    for (int r = 0; r < spec.size(); ++r) {
      if (r != spec.rank && !standbys_[k]->can_connect(spec.members[spec.rank], spec.members[r])) {
        standbys = k;
        break;
      }
    }
  }
  if (!standbys_.empty() && standbys == 0 && spec.size() > 1) {
    log_.warn("epoch " + std::to_string(spec.epoch) +
              ": a member advertises no standby path: this group runs without failover");
  }
  // One host: no network between the members to fail, and over shared memory the copy
  // the protocol keeps of each message is most of its cost. The view decides the
  // transport (from the adverts alone), so every member of the group leaves the standbys
  // out alike, before connecting any.
  if (standbys > 0 && failover_ == transport::PathChoice::kAuto) {
    if (auto carrier = table_->group_transport(spec); carrier && (*carrier)->name() == "shm") {
      log_.info("epoch " + std::to_string(spec.epoch) +
                ": shared memory carries this group: no failover (--failover forces it)");
      standbys = 0;
    }
  }
  // Members on several hosts, some sharing one: shared memory between those, TCP to the
  // others, one link over both (the view decides, so every member mixes alike).
  const std::vector<bool> local = pairs_on_shared_memory(spec);
  // Every path connects at once: the standbys' handshakes overlap the table's.
  std::vector<std::future<Result<std::unique_ptr<algorithms::Link>>>> more;
  for (std::size_t k = 0; k < standbys; ++k) {
    transport::Transport* standby = standbys_[k].get();
    more.push_back(std::async(std::launch::async, [standby, &spec, deadline] {
      return standby->connect_group(spec, deadline);
    }));
  }
  auto cancel_standbys = [&] {
    for (std::size_t k = 0; k < more.size(); ++k) {
      standbys_[k]->cancel_connect(spec.epoch + 1);
      more[k].wait();
    }
  };
  Primary primary;
  if (local.empty()) {
    auto connected = table_->connect_group(spec, deadline);
    if (!connected) {
      cancel_standbys();
      return connected.status();
    }
    primary.transport = connected->transport;
    primary.paths = connected->paths;
    primary.links.push_back(std::move(connected->link));
    primary.names.push_back(connected->transport);
    primary.carriers.push_back(connected->carrier);
    primary.peers.emplace_back();
  } else {
    auto connected = connect_mixed(spec, local, deadline);
    if (!connected) {
      cancel_standbys();
      return connected.status();
    }
    primary = std::move(*connected);
  }
  std::unique_ptr<algorithms::Link> link;
  bool failover = false;
  // The table's path is up; a standby that is not by half a stall timeout later (its
  // address unreachable, a firewall, its network down for now) would only hold the group
  // back: it goes without, and is re-dialled. Half: peers whose links are up already run
  // the first collective, and a member held here for a whole stall timeout would move
  // their pairs to the standby for nothing.
  const auto grace_for =
      std::chrono::duration_cast<std::chrono::milliseconds>(stall_timeout_) / 2;
  const auto grace = std::chrono::steady_clock::now() + grace_for;
  std::vector<Result<std::unique_ptr<algorithms::Link>>> standby_links;
  for (std::size_t k = 0; k < more.size(); ++k) {
    // Given up for now, not for the epoch: its pairs are re-dialled one by one (with_standby).
    const bool late = more[k].wait_until(grace) != std::future_status::ready;
    if (late) standbys_[k]->endpoint().cancel_group(spec.epoch);
    standby_links.push_back(more[k].get());
    if (late && !standby_links.back()) {
      standby_links.back() =
          error(StatusCode::kTimedOut, "not up " + std::to_string(grace_for.count()) +
                                           " ms (half the stall timeout) after the " +
                                           primary.transport + " path");
    }
  }
  // Without failover a mixed group's pairs have one path each: a pair on this host has no
  // TCP path (status and metrics list only the path that carries it).
  const bool routed =
      primary.links.size() > 1 && standby_links.empty() && failover_ != transport::PathChoice::kOn;
  Primary kept{{},           primary.names, primary.carriers, primary.peers, primary.transport,
               primary.paths};
  if (routed) {
    std::vector<bool> tcp_peers(static_cast<std::size_t>(spec.size()), false);
    for (int r = 0; r < spec.size(); ++r) {
      tcp_peers[static_cast<std::size_t>(r)] =
          r != spec.rank && !local[static_cast<std::size_t>(r)];
    }
    kept.peers[1] = std::move(tcp_peers);
  }
  if (routed) {
    // A group that mixes transports with no failover (one network, or --no-failover): each
    // pair on its transport, nothing added.
    TRIB_ASSIGN_OR_RETURN(link, with_routes(spec, std::move(primary)));
  } else if (!standby_links.empty() || primary.links.size() > 1) {
    TRIB_ASSIGN_OR_RETURN(
        link, with_standby(spec, std::move(primary), std::move(standby_links), &failover));
  } else {
    link = std::move(primary.links.front());
  }
  std::string line;
  for (int r = 0; r < spec.size(); ++r) {
    if (r == spec.rank) continue;
    line += (line.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " (member " +
            std::to_string(spec.members[r].member) + ") over " + kept.paths[r];
  }
  log_.info("epoch " + std::to_string(spec.epoch) + ": member " +
            std::to_string(spec.members[spec.rank].member) + " (rank " + std::to_string(spec.rank) +
            ") data paths: " + (line.empty() ? "none" : line) +
            (failover && standbys > 0
                 ? "; standby " + standby_list(standbys) + " per pair (stall timeout " +
                       std::to_string(
                           std::chrono::duration_cast<std::chrono::milliseconds>(stall_timeout_)
                               .count()) +
                       " ms)"
                 : ""));
  std::lock_guard lock(mu_);
  group_epoch_ = spec.epoch;
  group_transport_ = kept.transport;
  group_members_.clear();
  for (const auto& m : spec.members) group_members_.push_back(m.member);
  group_addresses_.clear();
  for (const auto& m : spec.members) group_addresses_.push_back(m.data_address);
  group_path_names_ = kept.names;
  group_path_carriers_ = kept.carriers;
  group_path_peers_ = kept.peers;
  const std::size_t used_standbys = failover ? standbys : 0;
  for (std::size_t k = 0; k < used_standbys; ++k) {
    group_path_names_.push_back(standby_name(k));
    group_path_carriers_.push_back(standbys_[k].get());
    group_path_peers_.emplace_back();
  }
  group_path_.assign(static_cast<std::size_t>(spec.size()), 0);
  for (int r = 0; r < spec.size(); ++r) {
    group_path_[static_cast<std::size_t>(r)] = first_group_path(r);
  }
  group_moves_.assign(static_cast<std::size_t>(spec.size()), 0);
  group_last_move_.assign(static_cast<std::size_t>(spec.size()), std::string());
  return link;
}

int DataPlane::first_group_path(int rank) const {
  for (std::size_t k = 0; k < group_path_peers_.size(); ++k) {
    const auto& peers = group_path_peers_[k];
    if (peers.empty() || (static_cast<std::size_t>(rank) < peers.size() && peers[rank])) {
      return static_cast<int>(k);
    }
  }
  return 0;
}

bool DataPlane::group_on_shared_memory() const { return group_transport() == "shm"; }

std::string DataPlane::group_transport() const {
  std::lock_guard lock(mu_);
  return group_transport_;
}

Result<std::unique_ptr<algorithms::Link>> DataPlane::with_standby(
    const transport::GroupSpec& spec, Primary primary,
    std::vector<Result<std::unique_ptr<algorithms::Link>>> standbys, bool* failover) {
  const std::string epoch = "epoch " + std::to_string(spec.epoch) + ": ";
  std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
  for (std::size_t k = 0; k < primary.links.size(); ++k) {
    if (dynamic_cast<algorithms::PollableLink*>(primary.links[k].get()) == nullptr) {
      // The same on every member (it depends on the transport, which the view decides).
      log_.warn(epoch + "the " + primary.names[k] + " link cannot be a failover path: no failover");
      if (primary.links.size() > 1) {
        return error(StatusCode::kInternal,
                     "the " + primary.names[k] + " link cannot be one path of a mixed group");
      }
      return std::move(primary.links.front());
    }
    TRIB_ASSIGN_OR_RETURN(auto path, transport::as_path(std::move(primary.links[k])));
    paths.push_back(std::move(path));
  }
  std::vector<bool> absent(standbys.size(), false);  // no link at all: nothing to re-dial into
  for (std::size_t k = 0; k < standbys.size(); ++k) {
    auto& standby = standbys[k];
    if (standby) {
      TRIB_ASSIGN_OR_RETURN(auto next, transport::as_path(std::move(*standby)));
      paths.push_back(std::move(next));
      continue;
    }
    // Every member of this group runs the failover protocol with the same paths (the view
    // says all advertise this standby); leaving one out here, while a peer whose standby
    // connected keeps it, would leave that pair numbering its paths two ways. Where it did
    // not connect the path is there without connections: each pair finds it down and
    // re-dials it in the background like a connection that failed (the redialer below).
    const Status why = error(standby.status().code(), "the standby path " + standby_name(k) +
                                                          " did not connect at the view's start (" +
                                                          standby.status().message() + ")");
    auto unconnected = standbys_[k]->unconnected_group(spec, why);
    if (unconnected) {
      log_.warn(epoch + why.message() + "; its pairs are re-dialled in the background");
      TRIB_ASSIGN_OR_RETURN(auto next, transport::as_path(std::move(*unconnected)));
      paths.push_back(std::move(next));
      continue;
    }
    log_.warn(epoch + why.message() + "; this epoch's pairs have no such path on this member (" +
              unconnected.status().to_string() + ")");
    paths.push_back(transport::make_absent_path(spec.rank, spec.size(), why));
    absent[k] = true;
  }
  transport::FailoverParams params;
  params.epoch = spec.epoch;
  params.path_names = primary.names;
  for (std::size_t k = 0; k < standbys.size(); ++k) params.path_names.push_back(standby_name(k));
  params.path_peers = primary.peers;
  for (int r = 0; r < spec.size(); ++r) {
    params.rank_names.push_back("rank " + std::to_string(r) + " (member " +
                                std::to_string(spec.members[static_cast<std::size_t>(r)].member) +
                                ")");
  }
  params.stall_deadline = stall_timeout_;
  params.core_per_rank =
      transport::core_per_rank(transport::ranks_on_this_host(spec), transport::usable_cores());
  params.log = log_;
  params.on_change = [this, e = spec.epoch](const transport::PathChange& c) {
    on_path_change(e, c);
  };
  // The TCP paths whose connections fail, or never came up, are re-dialled in the
  // background (not shared memory or RDMA).
  std::vector<PathRedialer::Path> redial(paths.size());
  for (std::size_t k = 0; k < primary.names.size(); ++k) {
    if (primary.names[k] == "tcp" && tcp_ != nullptr)
      redial[k] = {&tcp_->endpoint(), tcp_->paths(spec)};
  }
  const std::size_t first_standby = primary.names.size();
  for (std::size_t k = 0; k < standbys.size(); ++k) {
    if (!absent[k]) {
      redial[first_standby + k] = {standby_endpoints_[k].get(), standbys_[k]->paths(spec)};
    }
  }
  std::vector<std::string> zones;
  for (const auto& m : spec.members) zones.push_back(m.zone);
  auto inbox = std::make_shared<transport::ReconnectInbox>();
  redialer_->start(spec.epoch, spec.rank, std::move(redial), std::move(zones), inbox);
  params.reconnects = inbox;
  params.on_down = [this, e = spec.epoch](int path, int peer) { redialer_->want(e, path, peer); };
  // A pair whose every path failed with an error waits for a new connection as long as a
  // path may stall unnoticed, unless a knock finds its peer's process gone (then at once).
  params.stranded_grace = stall_timeout_;
  params.on_stranded = [this, e = spec.epoch](int peer) { redialer_->knock(e, peer); };
  TRIB_ASSIGN_OR_RETURN(auto link, transport::make_failover_link(std::move(params), std::move(paths)));
  *failover = true;
  return link;
}

void DataPlane::on_path_change(std::uint64_t epoch, const transport::PathChange& c) {
  std::lock_guard lock(mu_);
  const bool current = epoch == group_epoch_;  // not a link of an earlier group, going away
  if (current && c.peer >= 0 && c.peer < static_cast<int>(group_path_.size())) {
    group_path_[static_cast<std::size_t>(c.peer)] = c.to;
  }
  const std::string from = path_name(c.from, current);
  const std::string to = c.to < 0 ? "none" : path_name(c.to, current);
  // A move back up to a path that returned is a recovery, whichever side moved first.
  const std::string cause = c.recovered  ? "recovered"
                            : c.stranded ? "waiting"
                            : c.stall    ? "stall"
                            : c.by_peer  ? "peer"
                                         : "error";
  const std::string peer =
      current && c.peer >= 0 && c.peer < static_cast<int>(group_addresses_.size())
          ? group_addresses_[static_cast<std::size_t>(c.peer)]
          : "rank " + std::to_string(c.peer);
  if (current && c.peer >= 0 && c.peer < static_cast<int>(group_moves_.size())) {
    ++group_moves_[static_cast<std::size_t>(c.peer)];
    group_last_move_[static_cast<std::size_t>(c.peer)] = from + " -> " + to + " (" + cause + ")";
  }
  path_change_total_.fetch_add(1);
  for (PathChangeCount& k : path_changes_) {
    if (k.peer == peer && k.from == from && k.to == to && k.cause == cause) {
      ++k.count;
      return;
    }
  }
  path_changes_.push_back({peer, from, to, cause, 1});
}

std::string DataPlane::path_name(int index, bool current) const {
  if (current && index >= 0 && static_cast<std::size_t>(index) < group_path_names_.size()) {
    return group_path_names_[static_cast<std::size_t>(index)];
  }
  if (index == 0) return "earlier";
  return standby_name(static_cast<std::size_t>(index - 1));
}

std::vector<PathChangeCount> DataPlane::path_changes() const {
  std::lock_guard lock(mu_);
  return path_changes_;
}

std::vector<PeerPath> DataPlane::paths() const {
  std::lock_guard lock(mu_);
  std::vector<PeerPath> out;
  auto member = [&](int rank) {
    return rank < static_cast<int>(group_members_.size()) ? group_members_[rank] : 0;
  };
  auto on = [&](int rank, int path) {
    return rank >= 0 && rank < static_cast<int>(group_path_.size()) &&
           group_path_[static_cast<std::size_t>(rank)] == path;
  };
  // Each transport says what its latest group moved: the current group's, since every
  // one of them connected (or, a standby that did not, built its link) for this view.
  // A path that does not carry a pair (shared memory to another host) is none of its paths.
  for (std::size_t k = 0; k < group_path_carriers_.size(); ++k) {
    if (group_path_carriers_[k] == nullptr) continue;
    const auto& peers = group_path_peers_[k];
    for (const auto& t : group_path_carriers_[k]->traffic()) {
      if (!peers.empty() && (t.rank < 0 || static_cast<std::size_t>(t.rank) >= peers.size() ||
                             !peers[static_cast<std::size_t>(t.rank)])) {
        continue;
      }
      out.push_back({t.rank, member(t.rank), t.address, group_path_names_[k], t.bytes_sent,
                     t.bytes_received, on(t.rank, static_cast<int>(k))});
    }
  }
  return out;
}

std::vector<PairReport> DataPlane::pair_report() const {
  const std::vector<PeerPath> paths = this->paths();
  std::lock_guard lock(mu_);
  std::vector<PairReport> out;
  for (std::size_t r = 0; r < group_members_.size(); ++r) {
    const int rank = static_cast<int>(r);
    bool any = false;
    PairReport p{rank, group_members_[r], "none", "", {}, 0, {}};
    for (const PeerPath& path : paths) {
      if (path.rank != rank) continue;
      any = true;
      p.paths.push_back(path.transport);
      if (path.in_use) {
        p.transport = path.transport;
        p.address = path.address;
      }
    }
    if (!any) continue;  // this member, or a peer with no path
    if (r < group_moves_.size()) {
      p.moves = group_moves_[r];
      p.last_move = group_last_move_[r];
    }
    out.push_back(std::move(p));
  }
  return out;
}

FrameRefusals DataPlane::refusals() const {
  transport::TcpEndpointStats stats = endpoint_->stats();
  for (const auto& standby : standby_endpoints_) {
    const transport::TcpEndpointStats more = standby->stats();
    stats.bad_frames += more.bad_frames;
    stats.crc_failures += more.crc_failures;
    stats.tls_failures += more.tls_failures;
  }
  return {stats.bad_frames, stats.crc_failures, stats.tls_failures};
}

}  // namespace tributary::agent
