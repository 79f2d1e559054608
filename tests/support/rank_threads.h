// Runs one function per rank on its own thread and collects each rank's Status: the
// "ranks as threads" harness of the algorithm tests.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "core/status.h"

namespace tributary::testing {

inline std::vector<Status> run_ranks(int n, const std::function<Status(int rank)>& body) {
  std::vector<Status> results(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { results[static_cast<std::size_t>(r)] = body(r); });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace tributary::testing
