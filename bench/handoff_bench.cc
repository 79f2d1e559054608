// What handing a collective to another thread costs, measured on the product's own path:
// two real Workers (ranks as threads, the in-process control plane; shared memory, the
// transport table's choice on one host, or TCP over loopback with --transport tcp)
// run the same all-reduce called directly on the caller's thread and submitted to a
// CollectiveQueue (agent/collective_queue.h), whose one thread runs it and whose ticket the
// caller waits on: two thread wake-ups per collective, the cost a design with one driver
// thread per Worker would add to every call (docs/fault-tolerance.md, "Members between
// calls"). Modes alternate per round; per (size, mode) the median over the rounds of each
// round's median time per call on rank 0.
//
//   handoff_bench [--iters 2000] [--rounds 5] [--transport auto|tcp|shm]
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "agent/collective_queue.h"
#include "agent/worker.h"
#include "control_client/memory_control_plane.h"

namespace {

using namespace tributary;
using Steady = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 2000;
  int rounds = 5;
  std::string transport = "auto";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--transport" && i + 1 < argc) {
      transport = argv[++i];
    } else if ((a == "--iters" || a == "--rounds") && i + 1 < argc) {
      const int v = std::atoi(argv[++i]);
      if (v <= 0) {
        std::fprintf(stderr, "handoff_bench: %s needs a positive number\n", a.c_str());
        return 2;
      }
      (a == "--iters" ? iters : rounds) = v;
    } else {
      std::fprintf(stderr,
                   "usage: handoff_bench [--iters 2000] [--rounds 5] [--transport auto|tcp|shm]\n");
      return 2;
    }
  }
  membership::MembershipConfig mc;
  mc.initial_world_size = 2;
  mc.straggler.enabled = false;
  control_client::MemoryCoordinator coordinator(mc);
  std::vector<std::unique_ptr<agent::Worker>> workers(2);
  {
    std::vector<std::thread> starting;
    for (int t = 0; t < 2; ++t) {
      starting.emplace_back([&, t] {
        agent::WorkerConfig config;
        config.secret = "handoff-bench";
        config.host = "bench";
        config.transport = transport;
        agent::WorkerEnvironment env;
        env.control = coordinator.connect();
        auto w = agent::Worker::start(config, std::move(env));
        if (!w) {
          std::fprintf(stderr, "handoff_bench: %s\n", w.status().to_string().c_str());
          return;
        }
        workers[static_cast<std::size_t>(t)] = std::move(*w);
      });
    }
    for (auto& th : starting) th.join();
    if (!workers[0] || !workers[1]) return 1;
  }
  std::vector<std::unique_ptr<agent::CollectiveQueue>> queues;
  for (int t = 0; t < 2; ++t) queues.push_back(std::make_unique<agent::CollectiveQueue>());

  const std::vector<std::size_t> sizes = {4, 4096, 65536, 1 << 20};
  // [size][mode] -> the rounds' medians (us)
  std::vector<std::array<std::vector<double>, 2>> results(sizes.size());
  std::atomic<bool> ok{true};  // rank threads clear it
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      for (int m0 = 0; m0 < 2; ++m0) {
        const int mode = (m0 + round) % 2;  // which goes first alternates
        std::vector<double> rank0;
        std::vector<std::thread> ranks;
        for (int t = 0; t < 2; ++t) {
          ranks.emplace_back([&, t] {
            agent::Worker& w = *workers[static_cast<std::size_t>(t)];
            agent::CollectiveQueue& q = *queues[static_cast<std::size_t>(t)];
            std::vector<float> data(sizes[s] / sizeof(float), 1.0f);
            for (int i = 0; i < iters; ++i) {
              const auto t0 = Steady::now();
              Result<agent::Outcome> o = error(StatusCode::kInternal, "not run");
              auto run = [&] {
                return w.all_reduce(data.data(), data.data(), data.size(), DType::kFloat32,
                                    ReduceOp::kMax);
              };
              if (mode == 0) {
                o = run();
              } else {
                o = q.submit("all_reduce", run)->wait(Deadline::after(std::chrono::seconds(60)));
              }
              const auto t1 = Steady::now();
              if (!o) {
                std::fprintf(stderr, "handoff_bench: %s\n", o.status().to_string().c_str());
                ok = false;
                return;
              }
              if (t == 0) rank0.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            }
          });
        }
        for (auto& th : ranks) th.join();
        if (!ok) return 1;
        results[s][static_cast<std::size_t>(mode)].push_back(median(rank0));
      }
    }
  }
  std::printf("# handoff_bench: 2 Workers (--transport %s), float32 max all-reduce, %d iters x %d "
              "rounds; median of the rounds' medians, rank 0\n",
              transport.c_str(), iters, rounds);
  std::printf("%12s %12s %12s %12s %8s\n", "bytes", "direct us", "queued us", "hand-off us",
              "ratio");
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    const double d = median(results[s][0]);
    const double q = median(results[s][1]);
    std::printf("%12zu %12.1f %12.1f %12.1f %8.2f\n", sizes[s], d, q, q - d, d > 0 ? q / d : 0);
  }
  queues.clear();
  for (auto& w : workers) (void)w->leave();
  return 0;
}
