// TCP as an entry of the transport table (transport/transport_table.h), over the
// agent's TcpEndpoint: the transport every member can fall back on, and the source of
// the authenticated connections that shared memory sets itself up over.
//
// A member advertises "tcp" and one "tcp:<host:port>" per data address, in order of
// preference (--data-address, repeated); a peer that advertises no address entry is
// dialed at its view data_address. For each pair the lower rank dials the higher one's
// addresses in order and keeps the first that connects (TcpEndpoint::connect_group).
#pragma once

#include <string>
#include <vector>

#include "transport/tcp/tcp_endpoint.h"
#include "transport/receive_paths.h"
#include "transport/transport.h"

namespace tributary::transport {

class TcpTransport final : public transport::Transport, public transport::ChannelSource {
 public:
  // `endpoint` must outlive this transport; `addresses` (not empty) is what this member
  // advertises, most preferred first. `name` is what it advertises under: "tcp", or
  // "tcp-standby" for the listener of the standby path (agent/data_plane.h), which a
  // member without one neither advertises nor finds in a peer's advert.
  // `combine`: whether its links combine receives (transport/receive_paths.h).
  TcpTransport(TcpEndpoint& endpoint, std::vector<std::string> addresses,
               std::string name = "tcp",
               transport::PathChoice combine = transport::PathChoice::kAuto);

  std::string_view name() const override { return name_; }
  std::vector<std::string> advertise() const override;
  bool can_connect(const transport::MemberAdvert& self,
                   const transport::MemberAdvert& peer) const override;
  Result<std::unique_ptr<algorithms::Link>> connect_group(const transport::GroupSpec& spec,
                                                          Deadline deadline) override;
  void cancel_connect(std::uint64_t newer_epoch) override;
  // The endpoint's latest group (a standby's too: each has an endpoint of its own).
  std::vector<transport::PeerTraffic> traffic() const override;
  // This group's link with no connection yet (TcpEndpoint::unconnected_link), every pair
  // failing with `why` until re-dialled: a standby path that did not connect.
  Result<std::unique_ptr<algorithms::Link>> unconnected_group(const transport::GroupSpec& spec,
                                                              Status why);
  Result<std::vector<transport::PeerChannel>> connect_channels(const transport::GroupSpec& spec,
                                                               Deadline deadline) override;

  // A member's addresses in order of preference, from its advert ("tcp" entries, or its
  // view data_address when it has none).
  static std::vector<std::string> addresses_of(const transport::MemberAdvert& member);
  // The same for this transport's name (a standby listener has no fallback address).
  std::vector<std::string> advertised_by(const transport::MemberAdvert& member) const;
  // What connect_group dials: every rank's addresses on this transport, by rank.
  std::vector<std::vector<std::string>> paths(const transport::GroupSpec& spec) const;
  TcpEndpoint& endpoint() const { return endpoint_; }
  // What this group's links do that depends on where its ranks run.
  TcpGroupOptions group_options(const transport::GroupSpec& spec) const;

 private:
  TcpEndpoint& endpoint_;
  std::vector<std::string> addresses_;
  std::string name_;
  transport::PathChoice combine_;
};

}  // namespace tributary::transport
