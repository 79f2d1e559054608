#include "transport/tcp/tcp_transport.h"

#include "core/check.h"

namespace tributary::transport {

TcpTransport::TcpTransport(TcpEndpoint& endpoint, std::vector<std::string> addresses,
                           std::string name, transport::PathChoice combine)
    : endpoint_(endpoint),
      addresses_(std::move(addresses)),
      name_(std::move(name)),
      combine_(combine) {
  TRIB_CHECK(!addresses_.empty()) << "a TCP transport needs an address to advertise";
}

std::vector<std::string> TcpTransport::advertise() const {
  std::vector<std::string> out{name_};
  for (const std::string& a : addresses_) out.push_back(name_ + ":" + a);
  return out;
}

std::vector<std::string> TcpTransport::advertised_by(const transport::MemberAdvert& member) const {
  if (name_ == "tcp") return addresses_of(member);
  std::vector<std::string> out;
  for (std::string& a : transport::capability_parameters(member.capabilities, name_)) {
    if (!a.empty()) out.push_back(std::move(a));
  }
  return out;
}

std::vector<std::string> TcpTransport::addresses_of(const transport::MemberAdvert& member) {
  std::vector<std::string> out;
  for (std::string& a : transport::capability_parameters(member.capabilities, "tcp")) {
    if (!a.empty()) out.push_back(std::move(a));
  }
  if (out.empty() && !member.data_address.empty()) out.push_back(member.data_address);
  return out;
}

bool TcpTransport::can_connect(const transport::MemberAdvert& self,
                               const transport::MemberAdvert& peer) const {
  return !advertised_by(self).empty() && !advertised_by(peer).empty();
}

std::vector<std::vector<std::string>> TcpTransport::paths(const transport::GroupSpec& spec) const {
  std::vector<std::vector<std::string>> out;
  out.reserve(spec.members.size());
  for (const transport::MemberAdvert& m : spec.members) out.push_back(advertised_by(m));
  return out;
}

TcpGroupOptions TcpTransport::group_options(const transport::GroupSpec& spec) const {
  const int local_ranks = transport::ranks_on_this_host(spec);
  const int cores = transport::usable_cores();
  TcpGroupOptions options;
  options.combine =
      transport::choose_receive_paths(combine_, transport::PathChoice::kOff, local_ranks, cores)
          .combine;
  options.core_per_rank = transport::core_per_rank(local_ranks, cores);
  return options;
}

Result<std::unique_ptr<algorithms::Link>> TcpTransport::connect_group(
    const transport::GroupSpec& spec, Deadline deadline) {
  std::vector<std::string> zones;
  zones.reserve(spec.members.size());
  for (const transport::MemberAdvert& m : spec.members) zones.push_back(m.zone);
  return endpoint_.connect_group(spec.epoch, spec.rank, paths(spec), deadline, zones,
                                 group_options(spec));
}

Result<std::unique_ptr<algorithms::Link>> TcpTransport::unconnected_group(
    const transport::GroupSpec& spec, Status why) {
  return endpoint_.unconnected_link(spec.epoch, spec.rank, paths(spec), std::move(why),
                                    group_options(spec));
}

std::vector<transport::PeerTraffic> TcpTransport::traffic() const {
  std::vector<transport::PeerTraffic> out;
  for (const TcpPeerStats& p : endpoint_.stats().peers) {
    out.push_back({p.rank, p.address, p.bytes_sent, p.bytes_received});
  }
  return out;
}

void TcpTransport::cancel_connect(std::uint64_t newer_epoch) {
  endpoint_.cancel_connect(newer_epoch);
}

Result<std::vector<transport::PeerChannel>> TcpTransport::connect_channels(
    const transport::GroupSpec& spec, Deadline deadline) {
  TRIB_ASSIGN_OR_RETURN(std::vector<PeerSocket> sockets,
                        endpoint_.connect_sockets(spec.epoch, spec.rank, paths(spec), deadline));
  std::vector<transport::PeerChannel> out;
  out.reserve(sockets.size());
  for (PeerSocket& s : sockets) out.push_back({s.rank, s.fd, std::move(s.address)});
  return out;
}

}  // namespace tributary::transport
