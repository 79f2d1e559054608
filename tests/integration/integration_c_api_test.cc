// The C API end to end: a real coordinator on an ephemeral port and three workers, each
// driven from its own thread through tributary_* calls only, over real loopback sockets.
#include "agent/c_api.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/coordinator.h"

namespace {

constexpr int kWorkers = 3;

TEST(CApi, WorkersAllReduceBroadcastAndLeave) {
  tributary::coordinator::CoordinatorConfig config;
  config.secret = "c-api-secret";
  config.initial_world_size = kWorkers;
  config.metrics_address = "";
  // Quiet: the coordinator's lines are not what this test is about.
  tributary::coordinator::Coordinator coordinator(
      config, tributary::Logger("coordinator", [](const tributary::LogRecord&) {}));
  ASSERT_TRUE(coordinator.start().is_ok());
  const std::string endpoint = coordinator.endpoint();

  std::vector<int> failures(kWorkers, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers; ++t) {
    threads.emplace_back([&, t] {
      tributary_worker_config c{};
      c.coordinator = endpoint.c_str();
      c.secret = "c-api-secret";
      c.join_timeout_ms = 20000;
      c.collective_timeout_ms = 20000;
      tributary_worker* w = nullptr;
      if (tributary_worker_start(&c, &w) != 0) {
        ADD_FAILURE() << "start: " << tributary_last_error();
        return;
      }
      const int rank = tributary_worker_rank(w);
      const int size = tributary_worker_size(w);
      int bad = 0;
      std::vector<float> data(1001);
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(rank + i % 5);
      tributary_outcome outcome{};
      if (tributary_all_reduce(w, data.data(), data.data(), data.size(), /*float32*/ 0,
                               /*sum*/ 0, &outcome) != 0) {
        ADD_FAILURE() << "all_reduce: " << tributary_last_error();
        ++bad;
      }
      for (std::size_t i = 0; i < data.size(); ++i) {
        const float want =
            static_cast<float>(size * (size - 1) / 2 + size * static_cast<int>(i % 5));
        bad += data[i] != want;
      }
      bad += outcome.contributors != size;
      std::vector<std::int64_t> b(17, rank == 1 ? 42 : 0);
      if (tributary_broadcast(w, b.data(), b.data(), b.size(), /*int64*/ 7, 1, nullptr) != 0) ++bad;
      for (auto v : b) bad += v != 42;
      // A bad dtype is refused with a clear message, and the worker stays usable.
      if (tributary_all_reduce(w, data.data(), data.data(), 1, 99, 0, nullptr) == 0) ++bad;
      if (std::string(tributary_last_error()).find("dtype") == std::string::npos) ++bad;
      if (tributary_barrier(w) != 0) ++bad;
      if (tributary_worker_leave(w) != 0) ++bad;
      failures[t] = bad;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kWorkers; ++t) EXPECT_EQ(failures[t], 0) << "worker thread " << t;
  coordinator.stop();
}

}  // namespace
