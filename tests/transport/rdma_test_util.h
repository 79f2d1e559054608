// RDMA links for ranks as threads over fake verbs (fake_verbs.h): one fake device per
// rank (owner id = rank), queue pairs connected by hand the way RdmaTransport does
// (receives posted first), and a socketpair per pair standing in for the TCP connection
// that is the peer's pulse. Also the socketpair channel source the transport tests use.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <vector>

#include "tests/transport/fake_verbs.h"
#include "transport/rdma_link.h"
#include "transport/transport.h"

namespace tributary::testing {

// Tiny slots: a few hundred bytes, four credits, so that every message of a test is many
// chunks and the senders run out of credits all the time.
inline transport::RdmaSlots tiny_slots() { return {2, 4, 256}; }

struct RdmaGroup {
  std::shared_ptr<FakeFabric> fabric;
  std::vector<std::unique_ptr<algorithms::Link>> links;
};

inline RdmaGroup make_rdma_group(int n, transport::RdmaSlots slots = tiny_slots(),
                                 Logger log = Logger("link")) {
  RdmaGroup g;
  g.fabric = std::make_shared<FakeFabric>();
  std::vector<std::unique_ptr<transport::VerbsGroup>> groups;
  for (int r = 0; r < n; ++r) {
    std::vector<int> peers;
    for (int p = 0; p < n; ++p) {
      if (p != r) peers.push_back(p);
    }
    auto group = g.fabric->device(r)->open_group(peers, slots);
    if (!group.is_ok()) return {};
    groups.push_back(std::move(*group));
  }
  std::vector<std::vector<transport::RdmaPeer>> peers(static_cast<std::size_t>(n));
  for (int lo = 0; lo < n; ++lo) {
    for (int hi = lo + 1; hi < n; ++hi) {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return {};
      if (!transport::post_initial_receives(*groups[lo], hi, slots).is_ok() ||
          !transport::post_initial_receives(*groups[hi], lo, slots).is_ok() ||
          !groups[lo]->connect(hi, groups[hi]->local_address(lo)).is_ok() ||
          !groups[hi]->connect(lo, groups[lo]->local_address(hi)).is_ok()) {
        return {};
      }
      peers[lo].push_back(
          {hi, fds[0], "pair " + std::to_string(lo), slots.recv_slots, slots.slot_bytes});
      peers[hi].push_back(
          {lo, fds[1], "pair " + std::to_string(hi), slots.recv_slots, slots.slot_bytes});
    }
  }
  for (int r = 0; r < n; ++r) {
    transport::RdmaLinkParams p;
    p.epoch = 1;
    p.rank = r;
    p.size = n;
    p.log = log;
    p.slots = slots;
    p.counters = std::make_shared<transport::TrafficCounters>(n);
    auto link = transport::make_rdma_link(std::move(p), std::move(groups[r]), std::move(peers[r]));
    if (!link.is_ok()) return {};
    g.links.push_back(std::move(*link));
  }
  return g;
}

// Until rank `r`'s queue is armed (it sleeps, or is about to), or 10 s.
inline bool wait_until_armed(const FakeFabric& fabric, int r) {
  const Deadline limit = Deadline::after(std::chrono::seconds(10));
  while (!fabric.armed(r)) {
    if (limit.passed()) return false;
    std::this_thread::yield();
  }
  return true;
}

// Connections for every pair of an n-rank group, handed out per rank.
class SocketpairChannels final : public transport::ChannelSource {
 public:
  explicit SocketpairChannels(int n) : by_rank_(static_cast<std::size_t>(n)) {
    for (int lo = 0; lo < n; ++lo) {
      for (int hi = lo + 1; hi < n; ++hi) {
        int fds[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) continue;
        by_rank_[lo].push_back({hi, fds[0], "fake"});
        by_rank_[hi].push_back({lo, fds[1], "fake"});
      }
    }
  }
  ~SocketpairChannels() override {
    for (auto& v : by_rank_) {
      for (auto& c : v) ::close(c.fd);
    }
  }
  Result<std::vector<transport::PeerChannel>> connect_channels(const transport::GroupSpec& spec,
                                                               Deadline) override {
    std::lock_guard lock(mu_);
    return std::exchange(by_rank_[spec.rank], {});
  }
  // Takes rank `rank`'s end towards `peer` away, for a test to speak on it by hand.
  int steal(int rank, int peer) {
    std::lock_guard lock(mu_);
    auto& v = by_rank_[rank];
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->rank == peer) {
        const int fd = it->fd;
        v.erase(it);
        return fd;
      }
    }
    return -1;
  }

 private:
  std::mutex mu_;
  std::vector<std::vector<transport::PeerChannel>> by_rank_;
};

}  // namespace tributary::testing
