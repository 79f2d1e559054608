// What the failover link adds to one message when nothing fails, measured without the
// agent: two ranks as threads over a real shared-memory link (one segment, a socketpair
// for its doorbells), and the same with a failover link over [that link, a standby
// shared-memory link]. Two patterns, each as many rounds as --iters:
//   pingpong  rank 0 sends, rank 1 receives and sends back, rank 0 receives
//   exchange  both send and receive at once (the direct all-reduce's pattern at N = 2)
// Modes interleave per repetition; the table holds the median µs per round over the
// repetitions and the failover/plain ratio.
//
//   failover_pingpong_bench [--bytes 4096] [--iters 20000] [--reps 7] [--only plain|failover]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/rank_threads.h"
#include "tests/transport/shm_test_util.h"
#include "transport/failover_link.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

enum class Pattern { kPingPong, kExchange };

Status rounds(algorithms::Link& link, Pattern pattern, std::size_t bytes, int iters) {
  std::vector<std::byte> out(bytes, std::byte{1});
  std::vector<std::byte> in(bytes);
  const int peer = 1 - link.rank();
  const auto deadline = Deadline::after(std::chrono::seconds(60));
  for (int i = 0; i < iters; ++i) {
    const algorithms::Tag tag{static_cast<std::uint64_t>(i) + 1, 0, 0};
    if (pattern == Pattern::kExchange) {
      const auto r = link.recv(peer, tag, in);
      const auto s = link.send(peer, tag, out);
      TRIB_RETURN_IF_ERROR(link.wait(s, deadline));
      TRIB_RETURN_IF_ERROR(link.wait(r, deadline));
    } else if (link.rank() == 0) {
      TRIB_RETURN_IF_ERROR(link.wait(link.send(peer, tag, out), deadline));
      TRIB_RETURN_IF_ERROR(link.wait(link.recv(peer, tag, in), deadline));
    } else {
      TRIB_RETURN_IF_ERROR(link.wait(link.recv(peer, tag, in), deadline));
      TRIB_RETURN_IF_ERROR(link.wait(link.send(peer, tag, out), deadline));
    }
  }
  return transport::drain(link, deadline);
}

// µs per round, or a negative value when a rank failed.
double measure(bool failover, Pattern pattern, std::size_t bytes, int iters) {
  testing::ShmGroup first = testing::make_shm_group(2, 1 << 20);
  testing::ShmGroup standby = testing::make_shm_group(2, 1 << 20);
  if (first.links.size() != 2 || standby.links.size() != 2) return -1;
  std::vector<std::unique_ptr<algorithms::Link>> links(2);
  for (int r = 0; r < 2; ++r) {
    if (!failover) {
      links[r] = std::move(first.links[r]);
      continue;
    }
    std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
    for (auto* g : {&first, &standby}) {
      auto path = transport::as_path(std::move(g->links[r]));
      if (!path.is_ok()) return -1;
      paths.push_back(std::move(*path));
    }
    transport::FailoverParams params;
    params.path_names = {"shm", "standby"};
    auto link = transport::make_failover_link(std::move(params), std::move(paths));
    if (!link.is_ok()) return -1;
    links[r] = std::move(*link);
  }
  Clock::time_point start;
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    // A short warm-up, then the timed rounds (rank 0's clock).
    TRIB_RETURN_IF_ERROR(rounds(*links[r], pattern, bytes, 200));
    if (r == 0) start = Clock::now();
    return rounds(*links[r], pattern, bytes, iters);
  });
  const auto end = Clock::now();
  for (const Status& st : statuses) {
    if (!st.is_ok()) {
      std::fprintf(stderr, "failover_pingpong_bench: %s\n", st.to_string().c_str());
      return -1;
    }
  }
  return std::chrono::duration<double, std::micro>(end - start).count() / iters;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  using namespace tributary;
  std::size_t bytes = 4096;
  int iters = 20000;
  int reps = 7;
  std::string only;  // "plain" or "failover": that mode alone (for a profiler)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--bytes") {
      bytes = std::stoul(argv[i + 1]);
    } else if (flag == "--iters") {
      iters = std::stoi(argv[i + 1]);
    } else if (flag == "--reps") {
      reps = std::stoi(argv[i + 1]);
    } else if (flag == "--only") {
      only = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: failover_pingpong_bench [--bytes N] [--iters N] [--reps N] "
                   "[--only plain|failover]\n");
      return 2;
    }
  }
  std::printf("# bytes=%zu iters=%d reps=%d (µs per round, median over reps)\n", bytes, iters,
              reps);
  std::printf("%10s %12s %12s %8s\n", "pattern", "plain", "failover", "ratio");
  for (Pattern pattern : {Pattern::kPingPong, Pattern::kExchange}) {
    std::vector<double> plain, failover;
    for (int r = 0; r < reps; ++r) {
      plain.push_back(only == "failover" ? 1 : measure(false, pattern, bytes, iters));
      failover.push_back(only == "plain" ? 1 : measure(true, pattern, bytes, iters));
      if (plain.back() < 0 || failover.back() < 0) return 1;
    }
    const double p = median(plain), f = median(failover);
    std::printf("%10s %12.2f %12.2f %8.2f\n",
                pattern == Pattern::kPingPong ? "pingpong" : "exchange", p, f, f / p);
  }
  return 0;
}
