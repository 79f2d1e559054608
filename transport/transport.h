// A data-plane transport: one way of connecting the members of an epoch's group
// (shared memory, TCP, later RDMA), chosen per pair from what both members advertise.
//
// Contract:
// - advertise() is what this member tells the coordinator about this transport (strings
//   in the view's capabilities: the transport's name, optionally "name:parameter" entries
//   such as one per TCP address). It is computed once, when the member starts.
// - can_connect(self, peer) decides from both members' adverts alone, and is symmetric
//   when both members run the same transport: the two ends of a pair always agree on
//   the transport without talking to each other. It never touches the network.
// - connect_group() builds a whole group (every rank other than spec.rank is a peer) and
//   blocks until every peer is connected and authenticated with the cluster secret, or
//   fails (kAuthFailed, kStaleEpoch, kMismatch, kTimedOut naming the missing peer,
//   kAborted when cancel_connect() superseded the epoch, kUnavailable when this transport
//   cannot serve a peer after all). What it returns is an algorithms::Link with the
//   guarantees of algorithms/link.h; the algorithms never see anything else.
// - Threading: one connect_group() at a time per transport; cancel_connect() from any
//   thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/link.h"
#include "core/clock.h"
#include "core/status.h"

namespace tributary::transport {

// What one member advertised, as the view carries it.
struct MemberAdvert {
  std::uint64_t member = 0;               // the coordinator's member id, for logs
  std::string data_address;               // "host:port": the first TCP address
  std::vector<std::string> capabilities;  // every transport's advertise(), in table order
  std::string zone;                       // its zone label (TLS across zones, transport/tcp/tls.h)
};

// One epoch's group as seen by this member: members[r] is rank r's advert.
struct GroupSpec {
  std::uint64_t epoch = 0;
  int rank = 0;
  std::vector<MemberAdvert> members;
  int size() const { return static_cast<int>(members.size()); }
};

// The bytes a transport moved to and from one peer of its latest group.
struct PeerTraffic {
  int rank = -1;
  std::string address;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual std::string_view name() const = 0;
  virtual std::vector<std::string> advertise() const = 0;
  virtual bool can_connect(const MemberAdvert& self, const MemberAdvert& peer) const = 0;
  virtual Result<std::unique_ptr<algorithms::Link>> connect_group(const GroupSpec& spec,
                                                                  Deadline deadline) = 0;
  virtual void cancel_connect(std::uint64_t newer_epoch) = 0;
  // The latest group's bytes per peer (own rank omitted); empty before the first group.
  virtual std::vector<PeerTraffic> traffic() const = 0;
};

// An authenticated byte stream to every peer of a group, for transports that set up
// their own channel over one (shared memory exchanges its segment names and rings its
// doorbells on it). The TCP transport provides it.
struct PeerChannel {
  int rank = -1;
  int fd = -1;          // connected, authenticated (either blocking mode); the receiver owns it
  std::string address;  // what was dialed or accepted, for logs
};

class ChannelSource {
 public:
  virtual ~ChannelSource() = default;
  // Every peer of the group, or the errors of Transport::connect_group().
  virtual Result<std::vector<PeerChannel>> connect_channels(const GroupSpec& spec,
                                                            Deadline deadline) = 0;
};

// "name" or "name:parameter" entries of `capabilities` whose name is `name`: the
// parameters, in order ("" for a bare "name").
std::vector<std::string> capability_parameters(const std::vector<std::string>& capabilities,
                                               std::string_view name);

}  // namespace tributary::transport
