// Per-view in-memory fabrics for Workers as threads (WorkerEnvironment::connect_links):
// the first Worker to connect epoch E creates a MemoryFabric of the view's size, the others
// get the same one; all live until the EpochFabrics goes (after its Workers). What
// worker_kill_boundary_test and worker_cost_refit_test both need.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "algorithms/memory_link.h"
#include "tests/support/forwarding_link.h"

namespace tributary::agent::in_process {

class EpochFabrics {
 public:
  // `on_create` prepares each new fabric (delays, ...) before any Worker gets it.
  explicit EpochFabrics(std::function<void(algorithms::MemoryFabric&)> on_create = {})
      : on_create_(std::move(on_create)) {}

  algorithms::MemoryFabric& at(std::uint64_t epoch, int size) {
    std::lock_guard lock(mu_);
    auto& f = by_epoch_[epoch];
    if (!f) {
      f = std::make_unique<algorithms::MemoryFabric>(size);
      if (on_create_) on_create_(*f);
      if (aborted_) abort_fabric(*f);
    }
    EXPECT_EQ(f->size(), size) << "members disagree about the size of epoch " << epoch;
    return *f;
  }
  // Fails every link of every fabric, now and later (a scenario past its time limit).
  void abort_all() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    for (auto& [epoch, f] : by_epoch_) abort_fabric(*f);
  }

 private:
  static void abort_fabric(algorithms::MemoryFabric& f) {
    for (int r = 0; r < f.size(); ++r) {
      f.link(r).abort(error(StatusCode::kAborted, "the test gave up on this scenario"));
    }
  }
  std::function<void(algorithms::MemoryFabric&)> on_create_;
  std::mutex mu_;
  std::map<std::uint64_t, std::unique_ptr<algorithms::MemoryFabric>> by_epoch_;
  bool aborted_ = false;
};

// A fabric's link handed to a Worker, which owns what connect_links returns.
using BorrowedLink = testing::ForwardingLink;

// WorldOptions::connect_links (in_process_world.h) that gives every Worker its rank's link
// of each view's fabric.
inline auto fabric_links(EpochFabrics& fabrics) {
  return [&fabrics](int /*t*/, std::uint64_t epoch, int rank,
                    int size) -> Result<std::unique_ptr<algorithms::Link>> {
    return std::unique_ptr<algorithms::Link>(
        std::make_unique<BorrowedLink>(fabrics.at(epoch, size).link(rank)));
  };
}

}  // namespace tributary::agent::in_process
