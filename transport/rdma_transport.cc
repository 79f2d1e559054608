#include "transport/rdma_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/little_endian.h"
#include "transport/channel_io.h"

namespace tributary::transport {
namespace {

constexpr std::uint32_t kOfferMagic = 0x4f4d4452;  // "RDMO"
constexpr std::uint16_t kOfferVersion = 1;
constexpr std::size_t kOfferBytes = 64;
constexpr char kReady = 'R';
constexpr char kRefused = 'N';
const std::string kSetup = "rdma setup";

// What one end of a pair sends the other: little-endian, fixed layout.
struct Offer {
  std::uint16_t refused = 0;  // this member could not open its queue pairs
  std::uint64_t epoch = 0;
  std::uint32_t from = 0;
  std::uint32_t to = 0;
  QpAddress address;
  std::uint32_t recv_slots = 0;
  std::uint32_t slot_bytes = 0;
};

std::array<std::byte, kOfferBytes> encode(const Offer& o) {
  std::array<std::byte, kOfferBytes> b{};
  le::store<std::uint32_t>(b.data(), kOfferMagic);
  le::store<std::uint16_t>(b.data() + 4, kOfferVersion);
  le::store<std::uint16_t>(b.data() + 6, o.refused);
  le::store<std::uint64_t>(b.data() + 8, o.epoch);
  le::store<std::uint32_t>(b.data() + 16, o.from);
  le::store<std::uint32_t>(b.data() + 20, o.to);
  le::store<std::uint32_t>(b.data() + 24, o.address.qpn);
  le::store<std::uint32_t>(b.data() + 28, o.address.psn);
  le::store<std::uint16_t>(b.data() + 32, o.address.lid);
  le::store<std::uint8_t>(b.data() + 34, o.address.mtu);
  le::store<std::uint32_t>(b.data() + 36, o.recv_slots);
  le::store<std::uint32_t>(b.data() + 40, o.slot_bytes);
  std::memcpy(b.data() + 44, o.address.gid.data(), 16);
  return b;
}

Result<Offer> decode(const std::array<std::byte, kOfferBytes>& b, const std::string& peer) {
  if (le::load<std::uint32_t>(b.data()) != kOfferMagic ||
      le::load<std::uint16_t>(b.data() + 4) != kOfferVersion) {
    return error(StatusCode::kBadFrame, peer + " sent no rdma offer (or another version of it)");
  }
  Offer o;
  o.refused = le::load<std::uint16_t>(b.data() + 6);
  o.epoch = le::load<std::uint64_t>(b.data() + 8);
  o.from = le::load<std::uint32_t>(b.data() + 16);
  o.to = le::load<std::uint32_t>(b.data() + 20);
  o.address.qpn = le::load<std::uint32_t>(b.data() + 24);
  o.address.psn = le::load<std::uint32_t>(b.data() + 28);
  o.address.lid = le::load<std::uint16_t>(b.data() + 32);
  o.address.mtu = le::load<std::uint8_t>(b.data() + 34);
  o.recv_slots = le::load<std::uint32_t>(b.data() + 36);
  o.slot_bytes = le::load<std::uint32_t>(b.data() + 40);
  std::memcpy(o.address.gid.data(), b.data() + 44, 16);
  return o;
}

// The advert's parameter "<device>/<port>/<gid or lid>": whether it is well formed, and
// whether the link is addressed by LID (InfiniBand) rather than GID (RoCE).
struct AdvertKind {
  bool valid = false;
  bool lid = false;
};

AdvertKind kind_of(const std::vector<std::string>& capabilities) {
  const std::vector<std::string> params = capability_parameters(capabilities, "rdma");
  if (params.empty()) return {};
  const std::string& a = params.front();
  const auto first = a.find('/');
  const auto second = first == std::string::npos ? first : a.find('/', first + 1);
  if (first == 0 || second == std::string::npos || second == first + 1 || second + 1 >= a.size()) {
    return {};
  }
  return {true, a.compare(second + 1, 3, "lid") == 0};
}

Status exchange(int fd, std::byte* buf, std::size_t n, bool out, Deadline deadline,
                const std::string& peer) {
  return channel_exchange(fd, buf, n, out, deadline, peer, kSetup);
}

// Both ends send, the lower rank first.
Status swap(const PeerChannel& c, int self, std::byte* mine, std::byte* theirs, std::size_t n,
            Deadline deadline, const std::string& peer) {
  if (self < c.rank) {
    TRIB_RETURN_IF_ERROR(exchange(c.fd, mine, n, true, deadline, peer));
    return exchange(c.fd, theirs, n, false, deadline, peer);
  }
  TRIB_RETURN_IF_ERROR(exchange(c.fd, theirs, n, false, deadline, peer));
  return exchange(c.fd, mine, n, true, deadline, peer);
}

// One pair: offers swapped (the lower rank's first) and checked, the queue pair connected,
// ready bytes swapped. A peer that refuses (its offer says so) gets no offer back.
Result<RdmaPeer> set_up_pair(const PeerChannel& c, const GroupSpec& spec, VerbsGroup& group,
                             const RdmaSlots& slots, Deadline deadline) {
  const std::string peer = "rank " + std::to_string(c.rank) + " at " + c.address;
  TRIB_RETURN_IF_ERROR(post_initial_receives(group, c.rank, slots));
  Offer mine;
  mine.epoch = spec.epoch;
  mine.from = static_cast<std::uint32_t>(spec.rank);
  mine.to = static_cast<std::uint32_t>(c.rank);
  mine.address = group.local_address(c.rank);
  mine.recv_slots = slots.recv_slots;
  mine.slot_bytes = slots.slot_bytes;
  std::array<std::byte, kOfferBytes> out = encode(mine), in{};
  if (spec.rank < c.rank) {
    TRIB_RETURN_IF_ERROR(exchange(c.fd, out.data(), out.size(), true, deadline, peer));
  }
  TRIB_RETURN_IF_ERROR(exchange(c.fd, in.data(), in.size(), false, deadline, peer));
  TRIB_ASSIGN_OR_RETURN(Offer theirs, decode(in, peer));
  if (theirs.refused != 0) {  // it has closed the connection, or is about to
    return error(StatusCode::kUnavailable, peer + " could not open its RDMA queue pairs");
  }
  if (spec.rank > c.rank) {
    TRIB_RETURN_IF_ERROR(exchange(c.fd, out.data(), out.size(), true, deadline, peer));
  }
  if (theirs.epoch != spec.epoch || theirs.from != static_cast<std::uint32_t>(c.rank) ||
      theirs.to != static_cast<std::uint32_t>(spec.rank)) {
    return error(StatusCode::kMismatch,
                 peer + " offered the queue pair of epoch " + std::to_string(theirs.epoch) +
                     ", ranks " + std::to_string(theirs.from) + " to " + std::to_string(theirs.to));
  }
  if (theirs.recv_slots < 4 || theirs.slot_bytes < 64) {
    return error(StatusCode::kBadFrame, peer + " offered " + std::to_string(theirs.recv_slots) +
                                            " receive slots of " +
                                            std::to_string(theirs.slot_bytes) + " bytes");
  }
  const Status connected = group.connect(c.rank, theirs.address);
  std::byte ready = static_cast<std::byte>(connected.is_ok() ? kReady : kRefused), answer{};
  TRIB_RETURN_IF_ERROR(swap(c, spec.rank, &ready, &answer, 1, deadline, peer));
  TRIB_RETURN_IF_ERROR(connected);
  if (answer != static_cast<std::byte>(kReady)) {
    return error(StatusCode::kUnavailable, peer + " could not connect its RDMA queue pair");
  }
  return RdmaPeer{c.rank, c.fd, c.address, theirs.recv_slots,
                  std::min(slots.slot_bytes, theirs.slot_bytes)};
}

// This member cannot take part: every peer hears it at once instead of at the deadline.
void refuse(const std::vector<PeerChannel>& channels, const GroupSpec& spec, Deadline deadline) {
  for (const PeerChannel& c : channels) {
    Offer o;
    o.refused = 1;
    o.epoch = spec.epoch;
    o.from = static_cast<std::uint32_t>(spec.rank);
    o.to = static_cast<std::uint32_t>(c.rank);
    std::array<std::byte, kOfferBytes> b = encode(o);
    (void)exchange(c.fd, b.data(), b.size(), true, deadline, "rank " + std::to_string(c.rank));
  }
}

}  // namespace

RdmaTransport::RdmaTransport(RdmaTransportConfig config, ChannelSource& channels,
                             Result<std::shared_ptr<VerbsDevice>> device)
    : config_(std::move(config)), channels_(channels) {
  if (device.is_ok() && *device != nullptr) {
    device_ = std::move(*device);
  } else {
    no_device_ =
        device.is_ok() ? error(StatusCode::kUnavailable, "no RDMA device") : device.status();
  }
}

std::vector<std::string> RdmaTransport::advertise() const {
  if (!device_) return {};
  return {"rdma:" + device_->advert()};
}

bool RdmaTransport::can_connect(const MemberAdvert& self, const MemberAdvert& peer) const {
  const AdvertKind mine = kind_of(self.capabilities);
  const AdvertKind theirs = kind_of(peer.capabilities);
  return mine.valid && theirs.valid && mine.lid == theirs.lid;
}

Result<std::unique_ptr<algorithms::Link>> RdmaTransport::connect_group(const GroupSpec& spec,
                                                                       Deadline deadline) {
  if (!device_) {
    return error(StatusCode::kUnavailable, "rdma: " + no_device_.message());
  }
  const RdmaSlots& slots = config_.slots;
  if (slots.recv_slots < 4 || slots.send_slots < 1 || slots.slot_bytes < 64) {
    return error(StatusCode::kInvalidArgument,
                 "rdma slots: want at least 4 receive slots, 1 "
                 "send slot and 64 bytes a slot");
  }
  TRIB_ASSIGN_OR_RETURN(std::vector<PeerChannel> channels,
                        channels_.connect_channels(spec, deadline));
  // Pairs in rank order on every member, so the two ends of each pair meet.
  std::sort(channels.begin(), channels.end(),
            [](const PeerChannel& a, const PeerChannel& b) { return a.rank < b.rank; });
  std::vector<int> ranks;
  for (const PeerChannel& c : channels) ranks.push_back(c.rank);
  Result<std::unique_ptr<VerbsGroup>> group = device_->open_group(ranks, slots);
  Status failed = group.status();
  if (!failed.is_ok()) refuse(channels, spec, deadline);
  std::vector<RdmaPeer> peers;
  for (const PeerChannel& c : channels) {
    if (!failed.is_ok()) {
      ::close(c.fd);
      continue;
    }
    Result<RdmaPeer> peer = set_up_pair(c, spec, **group, slots, deadline);
    if (!peer.is_ok()) {
      failed = peer.status();
      ::close(c.fd);
      continue;
    }
    peers.push_back(std::move(*peer));
  }
  if (!failed.is_ok()) {
    for (const RdmaPeer& p : peers) ::close(p.fd);
    config_.log.warn("epoch " + std::to_string(spec.epoch) +
                     ": rdma not set up: " + failed.message());
    return failed;
  }
  auto counters = std::make_shared<TrafficCounters>(spec.size());
  {
    std::lock_guard lock(mu_);
    counters_ = counters;
    addresses_.assign(spec.members.size(), "");
    for (const RdmaPeer& p : peers) addresses_[p.rank] = p.address;
    rank_ = spec.rank;
  }
  RdmaLinkParams params;
  params.epoch = spec.epoch;
  params.rank = spec.rank;
  params.size = spec.size();
  params.max_frame_bytes = config_.max_frame_bytes;
  params.busy_poll = config_.busy_poll;
  params.log = config_.log;
  params.slots = slots;
  params.counters = std::move(counters);
  return make_rdma_link(std::move(params), std::move(*group), std::move(peers));
}

std::vector<PeerTraffic> RdmaTransport::traffic() const {
  std::lock_guard lock(mu_);
  std::vector<PeerTraffic> out;
  if (!counters_) return out;
  for (int r = 0; r < counters_->size(); ++r) {
    if (r != rank_) out.push_back({r, addresses_[r], counters_->sent(r), counters_->received(r)});
  }
  return out;
}

}  // namespace tributary::transport
