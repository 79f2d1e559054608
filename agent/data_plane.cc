#include "agent/data_plane.h"

#include <algorithm>
#include <charconv>

#include "agent/tcp_transport.h"
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
  if (config.transport != "auto" && config.transport != "tcp" && config.transport != "shm") {
    return error(StatusCode::kInvalidArgument,
                 "--transport '" + config.transport + "': want auto, shm or tcp");
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
  if (config.transport != "tcp") {
    transport::ShmTransportConfig sc;
    sc.ring_bytes = config.shm_ring_bytes;
    sc.log = log;
    auto shm = std::make_unique<transport::ShmTransport>(sc, *tcp);
    d->shm_ = shm.get();
    ordered.push_back(std::move(shm));
  }
  // TCP stays in the table under "shm" too: shared memory sets itself up over its
  // connections. It carries no group there, because it does not advertise.
  if (config.transport == "shm") {
    d->table_ = std::make_unique<transport::TransportTable>(std::move(ordered), log);
    d->tcp_only_channels_ = std::move(tcp);
  } else {
    ordered.push_back(std::move(tcp));
    d->table_ = std::make_unique<transport::TransportTable>(std::move(ordered), log);
  }
  return d;
}

DataPlane::~DataPlane() {
  table_.reset();  // its transports use the endpoint
  tcp_only_channels_.reset();
}

std::uint16_t DataPlane::port() const { return endpoint_->port(); }

Result<std::unique_ptr<algorithms::Link>> DataPlane::connect(const transport::GroupSpec& spec,
                                                             Deadline deadline) {
  TRIB_ASSIGN_OR_RETURN(transport::ConnectedGroup group, table_->connect_group(spec, deadline));
  std::string line;
  for (int r = 0; r < spec.size(); ++r) {
    if (r == spec.rank) continue;
    line += (line.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " (member " +
            std::to_string(spec.members[r].member) + ") over " + group.paths[r];
  }
  log_.info("epoch " + std::to_string(spec.epoch) + ": member " +
            std::to_string(spec.members[spec.rank].member) + " (rank " + std::to_string(spec.rank) +
            ") data paths: " + (line.empty() ? "none" : line));
  std::lock_guard lock(mu_);
  group_transport_ = group.transport;
  group_members_.clear();
  for (const auto& m : spec.members) group_members_.push_back(m.member);
  return std::move(group.link);
}

std::vector<PeerPath> DataPlane::paths() const {
  std::lock_guard lock(mu_);
  std::vector<PeerPath> out;
  auto member = [&](int rank) {
    return rank < static_cast<int>(group_members_.size()) ? group_members_[rank] : 0;
  };
  if (group_transport_ == "shm" && shm_ != nullptr) {
    for (const auto& t : shm_->traffic()) {
      out.push_back({t.rank, member(t.rank), t.address, "shm", t.bytes_sent, t.bytes_received});
    }
  } else if (group_transport_ == "tcp") {
    for (const auto& p : endpoint_->stats().peers) {
      out.push_back({p.rank, member(p.rank), p.address, "tcp", p.bytes_sent, p.bytes_received});
    }
  }
  return out;
}

FrameRefusals DataPlane::refusals() const {
  const TcpEndpointStats stats = endpoint_->stats();
  return {stats.bad_frames, stats.crc_failures};
}

}  // namespace tributary::agent
