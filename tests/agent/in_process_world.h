// Ranks as threads for Worker tests: real Workers (loopback links) over the in-process
// control plane (control_client/memory_control_plane.h) on a fake clock. What
// worker_recovery_test and worker_federated_test both set up: the membership, the Worker
// configuration, a world joined concurrently and indexed by rank, and its teardown.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "agent/worker.h"
#include "algorithms/link.h"
#include "control_client/memory_control_plane.h"
#include "core/clock.h"

namespace tributary::agent::in_process {

inline constexpr Duration kHeartbeatTimeout = std::chrono::seconds(1);

inline membership::MembershipConfig membership_config(int n, bool straggler = false) {
  membership::MembershipConfig c;
  c.initial_world_size = static_cast<std::size_t>(n);
  c.heartbeat_timeout = kHeartbeatTimeout;
  c.straggler.enabled = straggler;
  return c;
}

inline WorkerConfig worker_config(std::size_t chunk_bytes = 256 * 1024) {
  WorkerConfig c;
  c.chunk_bytes = chunk_bytes;
  c.secret = "in-process";
  c.host = "test";
  c.join_timeout = std::chrono::seconds(20);
  c.recovery_timeout = std::chrono::seconds(20);
  // Far beyond a test's run time: a member blocked on a frozen peer must be freed by the
  // new view, not by its data-plane deadline.
  c.deadline_floor = std::chrono::seconds(60);
  return c;
}

// A Worker's environment over `coordinator`, its step timing on `clock` (nullptr: steady).
inline WorkerEnvironment environment(control_client::MemoryCoordinator& coordinator,
                                     const Clock* clock = nullptr) {
  WorkerEnvironment e;
  e.control = coordinator.connect();
  e.clock = clock;
  return e;
}

// Polls `done` (bounded) while the ranks' threads make it true.
inline bool eventually(const std::function<bool()>& done) {
  const Deadline limit = Deadline::after(std::chrono::seconds(20));
  while (!done()) {
    if (limit.passed()) return false;
    std::this_thread::yield();
  }
  return true;
}

struct WorldOptions {
  std::size_t chunk_bytes = 256 * 1024;
  // Worker t steps on clocks[t]; clock_of_rank (when given) gets, for each rank, the t of
  // the Worker that has it (also what tests without clocks use to find a Worker by t).
  std::vector<FakeClock>* clocks = nullptr;
  std::vector<int>* clock_of_rank = nullptr;
  // Adjusts worker t's configuration (its host label, its algorithm, ...) when given.
  std::function<void(int t, WorkerConfig&)> configure = nullptr;
  // Worker t's links for each view it moves to (WorkerEnvironment::connect_links) when
  // given: in-memory fabrics, links that break on cue. Empty: loopback TCP.
  std::function<Result<std::unique_ptr<algorithms::Link>>(int t, std::uint64_t epoch, int rank,
                                                          int size)>
      connect_links = nullptr;
};

// n Workers joined concurrently into the first view, indexed by rank; empty on a failure
// (reported).
inline std::vector<std::unique_ptr<Worker>> start_world(
    control_client::MemoryCoordinator& coordinator, int n, const WorldOptions& options = {}) {
  std::vector<std::unique_ptr<Worker>> started(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      const Clock* clock =
          options.clocks != nullptr ? &(*options.clocks)[static_cast<std::size_t>(t)] : nullptr;
      WorkerConfig config = worker_config(options.chunk_bytes);
      if (options.configure) options.configure(t, config);
      WorkerEnvironment env = environment(coordinator, clock);
      if (options.connect_links) {
        // A copy: the Worker calls it at every later view, long after `options` is gone.
        env.connect_links = [links = options.connect_links, t](std::uint64_t epoch, int rank,
                                                               int size) {
          return links(t, epoch, rank, size);
        };
      }
      auto w = Worker::start(config, std::move(env));
      if (!w) {
        ADD_FAILURE() << w.status().to_string();
        return;
      }
      started[static_cast<std::size_t>(t)] = std::move(*w);
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::unique_ptr<Worker>> by_rank(static_cast<std::size_t>(n));
  if (options.clock_of_rank != nullptr) {
    options.clock_of_rank->assign(static_cast<std::size_t>(n), -1);
  }
  for (int t = 0; t < n; ++t) {
    auto& w = started[static_cast<std::size_t>(t)];
    if (!w) return {};
    const auto rank = static_cast<std::size_t>(w->rank());
    if (options.clock_of_rank != nullptr) options.clock_of_rank->at(rank) = t;
    by_rank.at(rank) = std::move(w);
  }
  return by_rank;
}

// Destroys the Workers concurrently (null ones too): each one's leave settles its links
// and tells the coordinator.
inline void leave_all(std::vector<std::unique_ptr<Worker>>& workers) {
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w.reset(); });
  for (auto& th : threads) th.join();
}

}  // namespace tributary::agent::in_process
