#include "agent/data_plane.h"

#include <algorithm>
#include <charconv>
#include <future>

#include "agent/tcp_transport.h"
#include "transport/absent_path.h"
#include "transport/failover_link.h"
#include "transport/rdma_transport.h"
#include "transport/shm_transport.h"

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

Result<std::unique_ptr<DataPlane>> DataPlane::start(const WorkerConfig& config, Logger log) {
  if (config.transport != "auto" && config.transport != "tcp" && config.transport != "shm" &&
      config.transport != "rdma") {
    return error(StatusCode::kInvalidArgument,
                 "--transport '" + config.transport + "': want auto, shm, rdma or tcp");
  }
  if (config.transport == "rdma" && !transport::rdma_verbs_built()) {
    return error(StatusCode::kInvalidArgument,
                 "--transport rdma: this build has no RDMA support (built without libibverbs)");
  }
  std::unique_ptr<DataPlane> d(new DataPlane());
  d->log_ = log;
  TcpEndpointConfig ec;
  ec.bind_host = config.bind_host;
  ec.port = config.data_port;
  ec.secret = config.secret;
  ec.connect_attempt_timeout = config.connect_attempt_timeout;
  ec.log = log;
  TRIB_ASSIGN_OR_RETURN(d->endpoint_, TcpEndpoint::listen(ec));
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
  auto tcp = std::make_unique<TcpTransport>(*d->endpoint_, d->addresses_);
  std::vector<std::unique_ptr<transport::Transport>> ordered;
  if (config.transport == "auto" || config.transport == "shm") {
    transport::ShmTransportConfig sc;
    sc.ring_bytes = config.shm_ring_bytes;
    sc.log = log;
    auto shm = std::make_unique<transport::ShmTransport>(sc, *tcp);
    d->shm_ = shm.get();
    ordered.push_back(std::move(shm));
  }
  // RDMA between shared memory and TCP: in a build with libibverbs; it advertises only
  // when a device with an active port was opened.
  if ((config.transport == "auto" && transport::rdma_verbs_built()) ||
      config.transport == "rdma") {
    auto device = transport::open_rdma_device();
    if (!device.is_ok() && config.transport == "rdma") {
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
  if (config.transport == "shm" || config.transport == "rdma") {
    d->table_ = std::make_unique<transport::TransportTable>(std::move(ordered), log);
    d->tcp_only_channels_ = std::move(tcp);
  } else {
    ordered.push_back(std::move(tcp));
    d->table_ = std::make_unique<transport::TransportTable>(std::move(ordered), log);
  }
  if (config.failover) {
    // The standby listener: same hosts, its own port, the second address first.
    ec.port = 0;
    TRIB_ASSIGN_OR_RETURN(d->standby_endpoint_, TcpEndpoint::listen(ec));
    const std::string standby_port = std::to_string(d->standby_endpoint_->port());
    std::vector<std::string> standby_addresses;
    for (const std::string& a : d->addresses_) {
      standby_addresses.push_back(a.substr(0, a.rfind(':') + 1) + standby_port);
    }
    if (standby_addresses.size() > 1) {
      std::rotate(standby_addresses.begin(), standby_addresses.begin() + 1,
                  standby_addresses.end());
    }
    d->standby_ = std::make_unique<TcpTransport>(*d->standby_endpoint_,
                                                 std::move(standby_addresses), "tcp-standby");
    d->stall_timeout_ = config.stall_timeout;
  }
  return d;
}

DataPlane::~DataPlane() {
  table_.reset();  // its transports use the endpoint
  tcp_only_channels_.reset();
  standby_.reset();
}

std::vector<std::string> DataPlane::capabilities() const {
  std::vector<std::string> out = table_->advertise();
  if (standby_) {
    for (std::string& s : standby_->advertise()) out.push_back(std::move(s));
  }
  return out;
}

void DataPlane::cancel_connect(std::uint64_t newer_epoch) {
  table_->cancel_connect(newer_epoch);
  if (standby_) standby_->cancel_connect(newer_epoch);
}

std::uint16_t DataPlane::port() const { return endpoint_->port(); }

Result<std::unique_ptr<algorithms::Link>> DataPlane::connect(const transport::GroupSpec& spec,
                                                             Deadline deadline) {
  bool standby = standby_ != nullptr && spec.size() > 1;
  for (int r = 0; standby && r < spec.size(); ++r) {
    standby = r == spec.rank || standby_->can_connect(spec.members[spec.rank], spec.members[r]);
  }
  if (standby_ && !standby && spec.size() > 1) {
    log_.warn("epoch " + std::to_string(spec.epoch) +
              ": a member advertises no standby path: this group runs without failover");
  }
  // Both paths connect at once: the standby's handshakes overlap the table's.
  std::future<Result<std::unique_ptr<algorithms::Link>>> second;
  if (standby) {
    second = std::async(std::launch::async,
                        [this, &spec, deadline] { return standby_->connect_group(spec, deadline); });
  }
  auto connected = table_->connect_group(spec, deadline);
  if (!connected) {
    if (second.valid()) {
      standby_->cancel_connect(spec.epoch + 1);
      second.wait();
    }
    return connected.status();
  }
  transport::ConnectedGroup group = std::move(*connected);
  std::unique_ptr<algorithms::Link> link = std::move(group.link);
  bool failover = false;
  if (second.valid() &&
      second.wait_for(std::chrono::duration_cast<std::chrono::nanoseconds>(stall_timeout_)) !=
          std::future_status::ready) {
    // The table's path is up; a standby that is not by a stall timeout later (its address
    // unreachable, a firewall) would only hold the group back: it goes without.
    standby_->cancel_connect(spec.epoch + 1);
  }
  if (second.valid()) {
    TRIB_ASSIGN_OR_RETURN(link, with_standby(spec, std::move(link), group.transport,
                                             second.get(), &failover));
  }
  std::string line;
  for (int r = 0; r < spec.size(); ++r) {
    if (r == spec.rank) continue;
    line += (line.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " (member " +
            std::to_string(spec.members[r].member) + ") over " + group.paths[r];
  }
  log_.info("epoch " + std::to_string(spec.epoch) + ": member " +
            std::to_string(spec.members[spec.rank].member) + " (rank " + std::to_string(spec.rank) +
            ") data paths: " + (line.empty() ? "none" : line) +
            (failover ? "; standby tcp-standby per pair (stall timeout " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               stall_timeout_)
                                               .count()) +
                            " ms)"
                      : ""));
  std::lock_guard lock(mu_);
  group_epoch_ = spec.epoch;
  group_transport_ = group.transport;
  group_members_.clear();
  for (const auto& m : spec.members) group_members_.push_back(m.member);
  group_addresses_.clear();
  for (const auto& m : spec.members) group_addresses_.push_back(m.data_address);
  group_path_.assign(static_cast<std::size_t>(spec.size()), 0);
  group_has_standby_ = failover;
  return link;
}

Result<std::unique_ptr<algorithms::Link>> DataPlane::with_standby(
    const transport::GroupSpec& spec, std::unique_ptr<algorithms::Link> primary,
    const std::string& primary_name, Result<std::unique_ptr<algorithms::Link>> standby,
    bool* failover) {
  const std::string epoch = "epoch " + std::to_string(spec.epoch) + ": ";
  if (dynamic_cast<algorithms::PollableLink*>(primary.get()) == nullptr) {
    // The same on every member (it depends on the transport, which the view decides).
    log_.warn(epoch + "the " + primary_name + " link cannot be a failover path: no failover");
    return primary;
  }
  std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
  TRIB_ASSIGN_OR_RETURN(auto first, transport::as_path(std::move(primary)));
  paths.push_back(std::move(first));
  if (standby) {
    TRIB_ASSIGN_OR_RETURN(auto second, transport::as_path(std::move(*standby)));
    paths.push_back(std::move(second));
  } else {
    // Every member of this group runs the failover protocol on its preferred path (the
    // view says all advertise a standby); where the standby did not connect, the pairs
    // simply have no second path. Running without the protocol here, while a peer whose
    // standby connected runs with it, would leave that pair speaking two protocols.
    log_.warn(epoch + "the standby path did not connect (" + standby.status().to_string() +
              "): this epoch's pairs have no standby on this member");
    paths.push_back(transport::make_absent_path(spec.rank, spec.size(), standby.status()));
  }
  transport::FailoverParams params;
  params.epoch = spec.epoch;
  params.path_names = {primary_name, "tcp-standby"};
  for (int r = 0; r < spec.size(); ++r) {
    params.rank_names.push_back("rank " + std::to_string(r) + " (member " +
                                std::to_string(spec.members[static_cast<std::size_t>(r)].member) +
                                ")");
  }
  params.stall_deadline = stall_timeout_;
  params.log = log_;
  params.on_change = [this, e = spec.epoch](const transport::PathChange& c) {
    on_path_change(e, c);
  };
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
  const std::string primary = current ? group_transport_ : "earlier";
  const std::string from = c.from == 0 ? primary : "tcp-standby";
  const std::string to = c.to < 0 ? "none" : c.to == 0 ? primary : "tcp-standby";
  // A move back up to a path that returned is a recovery, whichever side moved first.
  const std::string cause = c.recovered ? "recovered" : c.stall ? "stall" : c.by_peer ? "peer" : "error";
  const std::string peer =
      current && c.peer >= 0 && c.peer < static_cast<int>(group_addresses_.size())
          ? group_addresses_[static_cast<std::size_t>(c.peer)]
          : "rank " + std::to_string(c.peer);
  path_change_total_.fetch_add(1);
  for (PathChangeCount& k : path_changes_) {
    if (k.peer == peer && k.from == from && k.to == to && k.cause == cause) {
      ++k.count;
      return;
    }
  }
  path_changes_.push_back({peer, from, to, cause, 1});
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
  if (group_transport_ == "shm" && shm_ != nullptr) {
    for (const auto& t : shm_->traffic()) {
      out.push_back({t.rank, member(t.rank), t.address, "shm", t.bytes_sent, t.bytes_received,
                     on(t.rank, 0)});
    }
  } else if (group_transport_ == "rdma" && rdma_ != nullptr) {
    for (const auto& t : rdma_->traffic()) {
      out.push_back({t.rank, member(t.rank), t.address, "rdma", t.bytes_sent, t.bytes_received,
                     on(t.rank, 0)});
    }
  } else if (group_transport_ == "tcp") {
    for (const auto& p : endpoint_->stats().peers) {
      out.push_back({p.rank, member(p.rank), p.address, "tcp", p.bytes_sent, p.bytes_received,
                     on(p.rank, 0)});
    }
  }
  if (group_has_standby_ && standby_endpoint_) {
    for (const auto& p : standby_endpoint_->stats().peers) {
      out.push_back({p.rank, member(p.rank), p.address, "tcp-standby", p.bytes_sent,
                     p.bytes_received, on(p.rank, 1)});
    }
  }
  return out;
}

FrameRefusals DataPlane::refusals() const {
  TcpEndpointStats stats = endpoint_->stats();
  if (standby_endpoint_) {
    const TcpEndpointStats more = standby_endpoint_->stats();
    stats.bad_frames += more.bad_frames;
    stats.crc_failures += more.crc_failures;
  }
  return {stats.bad_frames, stats.crc_failures};
}

}  // namespace tributary::agent
