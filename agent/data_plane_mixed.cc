// The data plane's groups that mix transports per pair (docs/transports.md, "One
// transport per group, or per pair"): which pairs of a view go over shared memory, their
// connection, and the link that routes each pair when the group runs without failover.
#include "agent/data_plane.h"

#include "transport/failover_link.h"
#include "transport/pair_route_link.h"
#include "transport/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace tributary::agent {

std::vector<bool> DataPlane::pairs_on_shared_memory(const transport::GroupSpec& spec) const {
  // Only where TCP would carry the whole group (shared memory cannot, and nothing
  // between them can).
  if (shm_ == nullptr || tcp_ == nullptr || spec.size() < 3) {
    return {};
  }
  auto carrier = table_->group_transport(spec);
  if (!carrier || *carrier != tcp_) return {};
  // Whether the group mixes depends on every pair, not only this member's: a member alone
  // on its host runs the same link over the same paths as the others (its shared-memory
  // path carries none of its pairs), or the two ends of its pairs would speak differently.
  const auto n = static_cast<std::size_t>(spec.size());
  bool any = false;
  for (std::size_t i = 0; i < n && !any; ++i) {
    for (std::size_t j = i + 1; j < n && !any; ++j) {
      any = table_->choose(spec.members[i], spec.members[j]) == shm_;
    }
  }
  if (!any) return {};
  std::vector<bool> local(n, false);
  const transport::MemberAdvert& self = spec.members[static_cast<std::size_t>(spec.rank)];
  for (std::size_t r = 0; r < n; ++r) {
    if (static_cast<int>(r) != spec.rank) local[r] = table_->choose(self, spec.members[r]) == shm_;
  }
  return local;
}

Result<DataPlane::Primary> DataPlane::connect_mixed(const transport::GroupSpec& spec,
                                                    const std::vector<bool>& local,
                                                    Deadline deadline) {
  // One connection per pair, as for a TCP group; those to members on this host are
  // handed to shared memory, as its doorbells, and the TCP link starts without them: its
  // path for those pairs is their fallback, dialled in the background (the redialer), as a
  // standby that did not connect at the view's start.
  std::vector<std::string> zones;
  for (const auto& m : spec.members) zones.push_back(m.zone);
  // kUnavailable: the failover link takes the failure for what it is, not news.
  const Status why = error(StatusCode::kUnavailable,
                           "shared memory carries this pair; its TCP path is not up yet");
  TRIB_ASSIGN_OR_RETURN(transport::TcpEndpoint::SplitGroup split,
                        endpoint_->connect_split(spec.epoch, spec.rank, tcp_->paths(spec), local,
                                                 why, deadline, zones, tcp_->group_options(spec)));
  std::vector<transport::PeerChannel> channels;
  for (transport::PeerSocket& s : split.borrowed) {
    channels.push_back({s.rank, s.fd, std::move(s.address)});
  }
  TRIB_ASSIGN_OR_RETURN(auto shm_link, shm_->connect_over(spec, std::move(channels), deadline));
  Primary out;
  out.transport = "shm+tcp";
  out.links.push_back(std::move(shm_link));
  out.links.push_back(std::move(split.link));
  out.names = {"shm", "tcp"};
  out.carriers = {shm_, tcp_};
  out.peers = {local, {}};
  out.paths.assign(static_cast<std::size_t>(spec.size()), "");
  for (int r = 0; r < spec.size(); ++r) {
    if (r != spec.rank)
      out.paths[static_cast<std::size_t>(r)] = local[static_cast<std::size_t>(r)] ? "shm" : "tcp";
  }
  log_.info("epoch " + std::to_string(spec.epoch) +
            ": members on several hosts, some sharing a host: shared memory between those, TCP "
            "to the others");
  return out;
}

Result<std::unique_ptr<algorithms::Link>> DataPlane::with_routes(const transport::GroupSpec& spec,
                                                                 Primary primary) {
  std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
  for (std::size_t k = 0; k < primary.links.size(); ++k) {
    auto path = transport::as_path(std::move(primary.links[k]));
    if (!path) {
      return error(StatusCode::kInternal,
                   "the " + primary.names[k] + " link cannot be one path of a mixed group");
    }
    paths.push_back(std::move(*path));
  }
  transport::PairRouteParams params;
  params.path_peers = primary.peers;
  params.core_per_rank =
      transport::core_per_rank(transport::ranks_on_this_host(spec), transport::usable_cores());
  return transport::make_pair_route_link(std::move(params), std::move(paths));
}

}  // namespace tributary::agent
