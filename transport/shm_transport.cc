#include "transport/shm_transport.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "transport/channel_io.h"
#include "transport/cross_memory.h"

namespace tributary::transport {
namespace {

constexpr std::uint32_t kOfferMagic = 0x4f4d4853;  // "SHMO"
constexpr std::size_t kMaxNameBytes = 64;
constexpr char kMapped = 'K';
constexpr char kRefused = 'N';
constexpr std::uint32_t kCmaMagic = 0x31414d43;  // "CMA1"
constexpr char kCanRead = 'Y';
constexpr char kCannotRead = 'N';

Status exchange(int fd, std::byte* buf, std::size_t n, bool out, Deadline deadline,
                const std::string& peer) {
  return channel_exchange(fd, buf, n, out, deadline, peer, "shared-memory setup");
}

// The lower rank's half: create, offer, wait for the peer to map it, unlink.
Result<ShmSegment> offer(const PeerChannel& c, const GroupSpec& spec, std::uint64_t ring_bytes,
                         Deadline deadline, const std::string& peer, std::string* name_out) {
  Result<std::string> name = ShmSegment::random_name();
  if (name.is_ok()) *name_out = *name;
  Result<ShmSegment> segment = name.is_ok() ? ShmSegment::create(*name, spec.epoch, spec.rank,
                                                                 c.rank, ring_bytes)
                                            : Result<ShmSegment>(name.status());
  std::byte msg[8 + kMaxNameBytes] = {};
  std::memcpy(msg, &kOfferMagic, 4);
  if (!segment.is_ok()) {
    // An empty offer: the peer fails at once instead of at the deadline.
    (void)exchange(c.fd, msg, 8, true, deadline, peer);
    return segment.status();
  }
  const auto length = static_cast<std::uint32_t>(name->size());
  std::memcpy(msg + 4, &length, 4);
  std::memcpy(msg + 8, name->data(), name->size());
  std::byte answer{};
  Status st = exchange(c.fd, msg, 8 + name->size(), true, deadline, peer);
  if (st.is_ok()) st = exchange(c.fd, &answer, 1, false, deadline, peer);
  ShmSegment::unlink(*name);  // mapped on both sides now, or never will be
  TRIB_RETURN_IF_ERROR(st);
  if (answer != std::byte{kMapped}) {
    return error(StatusCode::kUnavailable, peer + " could not map the shared-memory segment");
  }
  return segment;
}

// The higher rank's half: read the name, map it, answer.
Result<ShmSegment> accept_offer(const PeerChannel& c, const GroupSpec& spec, Deadline deadline,
                                const std::string& peer, std::string* name_out) {
  std::byte head[8];
  TRIB_RETURN_IF_ERROR(exchange(c.fd, head, 8, false, deadline, peer));
  std::uint32_t magic = 0, length = 0;
  std::memcpy(&magic, head, 4);
  std::memcpy(&length, head + 4, 4);
  if (magic == kOfferMagic && length == 0) {
    return error(StatusCode::kUnavailable, peer + " could not create the shared-memory segment");
  }
  if (magic != kOfferMagic || length > kMaxNameBytes) {
    return error(StatusCode::kBadFrame, peer + " sent no shared-memory offer");
  }
  std::string name(length, '\0');
  TRIB_RETURN_IF_ERROR(
      exchange(c.fd, reinterpret_cast<std::byte*>(name.data()), length, false, deadline, peer));
  Result<ShmSegment> segment = ShmSegment::open(name, spec.epoch, c.rank, spec.rank);
  *name_out = name;
  auto answer = static_cast<std::byte>(segment.is_ok() ? kMapped : kRefused);
  TRIB_RETURN_IF_ERROR(exchange(c.fd, &answer, 1, true, deadline, peer));
  return segment;
}

// Both ends, once the segment is mapped on both: each names its pid and probe word (pid 0:
// do not read me), checks whether it can read the other (cross_memory.h), and says so.
// Single-copy messages flow towards a side that said it can read.
struct CmaPair {
  pid_t peer_pid = 0;
  bool read_peer = false;   // this side reads the peer's buffers
  bool peer_reads = false;  // the peer reads this side's
  std::string why_not;      // when this side cannot read the peer
};

Result<CmaPair> cma_handshake(const PeerChannel& c, const std::string& segment_name, bool enabled,
                              Deadline deadline, const std::string& peer) {
  std::byte mine[16];
  const std::uint32_t pid = enabled ? static_cast<std::uint32_t>(::getpid()) : 0;
  const std::uint64_t probe = cma_probe_address();
  std::memcpy(mine, &kCmaMagic, 4);
  std::memcpy(mine + 4, &pid, 4);
  std::memcpy(mine + 8, &probe, 8);
  std::byte theirs[16];
  TRIB_RETURN_IF_ERROR(exchange(c.fd, mine, sizeof(mine), true, deadline, peer));
  TRIB_RETURN_IF_ERROR(exchange(c.fd, theirs, sizeof(theirs), false, deadline, peer));
  std::uint32_t magic = 0, peer_pid = 0;
  std::uint64_t peer_probe = 0;
  std::memcpy(&magic, theirs, 4);
  std::memcpy(&peer_pid, theirs + 4, 4);
  std::memcpy(&peer_probe, theirs + 8, 8);
  if (magic != kCmaMagic) return error(StatusCode::kBadFrame, peer + " sent no single-copy offer");
  CmaPair out;
  out.peer_pid = static_cast<pid_t>(peer_pid);
  if (!enabled) {
    out.why_not = "off here";
  } else if (peer_pid == 0) {
    out.why_not = "off at the peer";
  } else if (Status st = check_cma_peer(out.peer_pid, segment_name, peer_probe); !st) {
    out.why_not = st.message();
  } else {
    out.read_peer = true;
  }
  auto verdict = static_cast<std::byte>(out.read_peer ? kCanRead : kCannotRead);
  TRIB_RETURN_IF_ERROR(exchange(c.fd, &verdict, 1, true, deadline, peer));
  TRIB_RETURN_IF_ERROR(exchange(c.fd, &verdict, 1, false, deadline, peer));
  out.peer_reads = verdict == static_cast<std::byte>(kCanRead);
  return out;
}

}  // namespace

std::string host_key() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat st {};
  const bool have_shm = ::stat("/dev/shm", &st) == 0;
  return (boot.empty() ? "unknown-boot" : boot) + "/" +
         (have_shm ? std::to_string(st.st_dev) + "." + std::to_string(st.st_ino) : "no-dev-shm");
}

ShmTransport::ShmTransport(ShmTransportConfig config, ChannelSource& channels)
    : config_(std::move(config)), channels_(channels) {
  if (config_.host_key.empty()) config_.host_key = host_key();
  // A segment's name lives for one round trip of a view's setup (seconds at most, bounded
  // by its deadline): one this old was left by a member killed in that window.
  constexpr Duration kStaleSegmentAge = std::chrono::minutes(10);
  if (const int removed =
          ShmSegment::sweep_stale(std::chrono::system_clock::now(), kStaleSegmentAge);
      removed > 0) {
    config_.log.info("removed " + std::to_string(removed) +
                     " shared-memory segment(s) in /dev/shm left by members killed while they "
                     "connected (older than 10 minutes)");
  }
}

std::vector<std::string> ShmTransport::advertise() const { return {"shm:" + config_.host_key}; }

bool ShmTransport::can_connect(const MemberAdvert& self, const MemberAdvert& peer) const {
  const std::vector<std::string> mine = capability_parameters(self.capabilities, "shm");
  const std::vector<std::string> theirs = capability_parameters(peer.capabilities, "shm");
  return !mine.empty() && !theirs.empty() && !mine.front().empty() &&
         mine.front() == theirs.front();
}

Result<std::unique_ptr<algorithms::Link>> ShmTransport::connect_group(const GroupSpec& spec,
                                                                      Deadline deadline) {
  TRIB_ASSIGN_OR_RETURN(std::vector<PeerChannel> channels,
                        channels_.connect_channels(spec, deadline));
  return connect_over(spec, std::move(channels), deadline);
}

Result<std::unique_ptr<algorithms::Link>> ShmTransport::connect_over(
    const GroupSpec& spec, std::vector<PeerChannel> channels, Deadline deadline) {
  std::vector<ShmPeer> peers;
  Status failed;
  const int local_ranks = ranks_on_this_host(spec);
  const int cores = usable_cores();
  const ReceivePaths paths =
      choose_receive_paths(config_.combine, config_.single_copy, local_ranks, cores);
  // Pairs in rank order on every member, so the two ends of each pair meet: the lowest
  // pair not yet set up is always next for both of its members.
  std::sort(channels.begin(), channels.end(),
            [](const PeerChannel& a, const PeerChannel& b) { return a.rank < b.rank; });
  for (PeerChannel& c : channels) {
    if (!failed.is_ok()) {
      ::close(c.fd);
      continue;
    }
    const std::string peer = "rank " + std::to_string(c.rank) + " at " + c.address;
    std::string name;
    Result<ShmSegment> segment = spec.rank < c.rank
                                     ? offer(c, spec, config_.ring_bytes, deadline, peer, &name)
                                     : accept_offer(c, spec, deadline, peer, &name);
    Result<CmaPair> cma = segment.is_ok()
                              ? cma_handshake(c, name, paths.single_copy, deadline, peer)
                              : Result<CmaPair>(segment.status());
    if (!cma.is_ok()) {
      failed = cma.status();
      ::close(c.fd);
      continue;
    }
    if (!cma->read_peer && paths.single_copy) {
      config_.log.debug("epoch " + std::to_string(spec.epoch) + ": " + peer +
                        ": no single-copy reads (" + cma->why_not + ")");
    }
    ShmPeer p{c.rank, c.fd, std::move(c.address), std::move(*segment)};
    p.peer_pid = cma->peer_pid;
    p.read_peer = cma->read_peer;
    p.peer_reads = cma->peer_reads;
    peers.push_back(std::move(p));
  }
  if (!failed.is_ok()) {
    for (const ShmPeer& p : peers) ::close(p.fd);
    config_.log.warn("epoch " + std::to_string(spec.epoch) +
                     ": shared memory not set up: " + failed.message());
    return failed;
  }
  auto counters = std::make_shared<TrafficCounters>(spec.size());
  {
    std::lock_guard lock(mu_);
    counters_ = counters;
    addresses_.assign(spec.members.size(), "");
    for (const ShmPeer& p : peers) addresses_[p.rank] = p.address;
    rank_ = spec.rank;
  }
  ShmLinkParams params;
  params.epoch = spec.epoch;
  params.rank = spec.rank;
  params.size = spec.size();
  params.max_frame_bytes = config_.max_frame_bytes;
  params.busy_poll =
      local_ranks >= 2 * cores ? config_.oversubscribed_busy_poll : config_.busy_poll;
  params.combine = paths.combine;
  params.single_copy_bytes = paths.single_copy ? kSingleCopyBytes : 0;
  params.log = config_.log;
  params.counters = std::move(counters);
  return make_shm_link(std::move(params), std::move(peers));
}

std::vector<PeerTraffic> ShmTransport::traffic() const {
  std::lock_guard lock(mu_);
  std::vector<PeerTraffic> out;
  if (!counters_) return out;
  for (int r = 0; r < counters_->size(); ++r) {
    if (r != rank_) out.push_back({r, addresses_[r], counters_->sent(r), counters_->received(r)});
  }
  return out;
}

}  // namespace tributary::transport
