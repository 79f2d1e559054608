// Shared-memory links for ranks as threads: one real segment per pair (created by the
// lower rank, mapped by the higher, unlinked at once) and a socketpair per pair standing
// in for the TCP connection that carries the doorbells and the peer's pulse.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

#include "transport/shm_link.h"

namespace tributary::testing {

struct ShmGroup {
  std::vector<std::unique_ptr<algorithms::Link>> links;
  // A second mapping of each pair's segment, by (low, high), for tests that poison one.
  std::vector<std::vector<transport::ShmSegment>> spare;
};

// Until rank `low` (the pair's lower rank) sleeps waiting on what `high` writes, or 10 s.
inline bool wait_until_asleep(const ShmGroup& g, int low, int high) {
  const transport::ShmRing ring = g.spare[low][high].incoming(/*self_is_low=*/true);
  const Deadline limit = Deadline::after(std::chrono::seconds(10));
  while (!ring.consumer_sleeping()) {
    if (limit.passed()) return false;
    std::this_thread::yield();
  }
  return true;
}

// `single_copy_bytes` > 0: sends that large go single-copy (the ranks are threads of this
// process, which can always read itself).
inline ShmGroup make_shm_group(int n, std::uint64_t ring_bytes, std::uint64_t epoch = 1,
                               Logger log = Logger("link"), std::uint64_t single_copy_bytes = 0) {
  ShmGroup g;
  std::vector<std::vector<transport::ShmPeer>> peers(static_cast<std::size_t>(n));
  g.spare.resize(static_cast<std::size_t>(n));
  for (int lo = 0; lo < n; ++lo) {
    g.spare[lo].resize(static_cast<std::size_t>(n));
    for (int hi = lo + 1; hi < n; ++hi) {
      const std::string name = *transport::ShmSegment::random_name();
      auto created = transport::ShmSegment::create(name, epoch, lo, hi, ring_bytes);
      auto opened = transport::ShmSegment::open(name, epoch, lo, hi);
      auto spare = transport::ShmSegment::open(name, epoch, lo, hi);
      transport::ShmSegment::unlink(name);
      int fds[2];
      if (!created.is_ok() || !opened.is_ok() || !spare.is_ok() ||
          ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
        return {};
      }
      peers[lo].push_back({hi, fds[0], "pair " + std::to_string(lo), std::move(*created)});
      peers[hi].push_back({lo, fds[1], "pair " + std::to_string(hi), std::move(*opened)});
      for (transport::ShmPeer* p : {&peers[lo].back(), &peers[hi].back()}) {
        p->peer_pid = ::getpid();
        p->read_peer = p->peer_reads = single_copy_bytes > 0;
      }
      g.spare[lo][hi] = std::move(*spare);
    }
  }
  for (int r = 0; r < n; ++r) {
    transport::ShmLinkParams p;
    p.epoch = epoch;
    p.rank = r;
    p.size = n;
    p.log = log;
    p.single_copy_bytes = single_copy_bytes;
    p.counters = std::make_shared<transport::TrafficCounters>(n);
    auto link = transport::make_shm_link(std::move(p), std::move(peers[r]));
    if (!link.is_ok()) return {};
    g.links.push_back(std::move(*link));
  }
  return g;
}

}  // namespace tributary::testing
