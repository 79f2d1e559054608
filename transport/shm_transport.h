// Shared memory between members on the same host: one segment per pair (shm_segment.h)
// and a ShmLink (shm_link.h) over it.
//
// Advertises "shm:<host key>", where the key names this kernel boot and this /dev/shm
// mount: two members can map each other's segments exactly when their keys are equal,
// so can_connect() compares keys and nothing else.
//
// Connecting a group borrows the authenticated connections of a ChannelSource (TCP):
// on each, the lower rank creates the pair's segment under a random name, sends the
// name, and unlinks it once the higher rank has mapped it and answered. A process that
// does not hold the cluster secret never gets a connection, so it never learns a name;
// the segment is mode 0600 besides. The connection then stays open as the pair's
// doorbell and pulse (shm_link.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"
#include "transport/receive_paths.h"
#include "transport/shm_link.h"
#include "transport/transport.h"

namespace tributary::transport {

struct ShmTransportConfig {
  // Per direction and pair; a power of two. Larger rings wake the peers less often.
  std::uint64_t ring_bytes = std::uint64_t{4} << 20;
  Duration busy_poll = std::chrono::microseconds(50);
  // ... where this host runs at least twice as many of the group's ranks as it has cores:
  // a yield there hands the core to ranks that spin too, so a 50 us window ends after a
  // yield or two and the wait sleeps, which costs the peer a doorbell and the sleeper a
  // wake-up (N = 8 on 2 cores, 4-64 KiB: 0.67-0.78x the time with 200 us; N = 2: 1.1-1.2x,
  // hence not everywhere; bench/results/shm_busy_poll_2026-11-28.md).
  Duration oversubscribed_busy_poll = std::chrono::microseconds(200);
  std::uint64_t max_frame_bytes = std::uint64_t{1} << 30;
  // Combining receives and single-copy messages (receive_paths.h): auto decides per group
  // from the ranks on this host and its cores.
  PathChoice combine = PathChoice::kAuto;
  PathChoice single_copy = PathChoice::kAuto;
  // Empty: this machine's (host_key()). Tests set distinct keys to play two hosts.
  std::string host_key;
  Logger log{"link"};
};

// The key of this kernel boot and /dev/shm mount.
std::string host_key();

class ShmTransport final : public Transport {
 public:
  // `channels` must outlive this transport.
  ShmTransport(ShmTransportConfig config, ChannelSource& channels);

  std::string_view name() const override { return "shm"; }
  std::vector<std::string> advertise() const override;
  bool can_connect(const MemberAdvert& self, const MemberAdvert& peer) const override;
  Result<std::unique_ptr<algorithms::Link>> connect_group(const GroupSpec& spec,
                                                          Deadline deadline) override;
  // The same over connections made already: one per peer on this host, in a group that
  // mixes transports (its pairs to other hosts fail at once: another path carries them).
  // Takes the connections (closed on failure too).
  Result<std::unique_ptr<algorithms::Link>> connect_over(const GroupSpec& spec,
                                                         std::vector<PeerChannel> channels,
                                                         Deadline deadline);
  void cancel_connect(std::uint64_t) override {}  // the channel source is cancelled itself

  std::vector<PeerTraffic> traffic() const override;

 private:
  ShmTransportConfig config_;
  ChannelSource& channels_;
  mutable std::mutex mu_;
  std::shared_ptr<TrafficCounters> counters_;
  std::vector<std::string> addresses_;
  int rank_ = -1;
};

}  // namespace tributary::transport
