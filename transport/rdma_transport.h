// RDMA verbs between members whose hosts have an RDMA device with an active port: one RC
// queue pair per pair of members and an RdmaLink (rdma_link.h) over them.
//
// Advertises "rdma:<device>/<port>/<gid or lid>" only when a device was opened (this
// build has libibverbs and ibv_get_device_list found a device with an active port);
// otherwise nothing, so no pair with this member ever picks it. can_connect() holds when
// both members advertise rdma on the same kind of link (both a GID: RoCE; both a LID:
// InfiniBand), from the adverts alone, symmetric. Whether the two devices share a fabric
// is not visible in the adverts: a pair that cannot reach each other fails to connect
// (kTimedOut or kPeerLost naming the peer), like a TCP address nobody answers.
//
// Connecting a group borrows the authenticated connections of a ChannelSource (TCP), as
// shared memory does: the queue pairs of the whole group are opened at once (one
// completion queue), then pairs are set up in rank order on every member; on each, the
// lower rank first sends its queue pair's address {qpn, psn, lid, gid, mtu} and its
// receive slots, the higher answers with its own, both move their queue pair INIT -> RTR
// -> RTS with every receive posted, and a ready byte each way says that neither sends
// before the other can receive. Everything is bounded by the caller's deadline (kTimedOut
// naming the peer). Sends and receives use registered bounce buffers only: no memory is
// registered for remote access, so a peer can write nowhere but into the receives posted
// for it. The connection then stays open as the pair's pulse (rdma_link.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"
#include "transport/rdma_link.h"
#include "transport/rdma_verbs.h"
#include "transport/shm_transport.h"  // PeerTraffic
#include "transport/transport.h"

namespace tributary::transport {

struct RdmaTransportConfig {
  RdmaSlots slots;
  Duration busy_poll = std::chrono::microseconds(50);
  std::uint64_t max_frame_bytes = std::uint64_t{1} << 30;
  Logger log{"link"};
};

class RdmaTransport final : public Transport {
 public:
  // `channels` must outlive this transport. `device` is the device to use, or why there is
  // none: then this member advertises no rdma, and connect_group() fails with kUnavailable
  // and that reason.
  RdmaTransport(RdmaTransportConfig config, ChannelSource& channels,
                Result<std::shared_ptr<VerbsDevice>> device);

  std::string_view name() const override { return "rdma"; }
  std::vector<std::string> advertise() const override;
  bool can_connect(const MemberAdvert& self, const MemberAdvert& peer) const override;
  Result<std::unique_ptr<algorithms::Link>> connect_group(const GroupSpec& spec,
                                                          Deadline deadline) override;
  void cancel_connect(std::uint64_t) override {}  // the channel source is cancelled itself

  // Why there is no device ("" when there is one).
  std::string unavailable_reason() const { return device_ ? "" : no_device_.message(); }
  // Chunk prefixes included.
  std::vector<PeerTraffic> traffic() const override;

 private:
  RdmaTransportConfig config_;
  ChannelSource& channels_;
  std::shared_ptr<VerbsDevice> device_;
  Status no_device_;
  mutable std::mutex mu_;
  std::shared_ptr<TrafficCounters> counters_;
  std::vector<std::string> addresses_;
  int rank_ = -1;
};

}  // namespace tributary::transport
