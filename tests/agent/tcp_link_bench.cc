// Sanity numbers for the TCP data plane on loopback: ranks are threads of this process,
// each with its own endpoint. Measured as nccl-tests does (mean time per iteration after
// warm-up, max over ranks; busbw = algbw * 2(n-1)/n). Not the product benchmark.
//   tcp_link_bench [ranks=4] [algorithm=auto] [busy_poll_us=50] [max_bytes=256M]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "algorithms/collectives.h"
#include "tests/agent/tcp_test_util.h"

using namespace tributary;
using namespace tributary::testing;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4;
  algorithms::AllReduceAlgorithm algorithm = algorithms::AllReduceAlgorithm::kAuto;
  if (argc > 2 && !algorithms::parse_all_reduce_algorithm(argv[2], &algorithm)) {
    std::fprintf(stderr, "unknown algorithm %s\n", argv[2]);
    return 2;
  }
  const Duration busy_poll = std::chrono::microseconds(argc > 3 ? std::atoi(argv[3]) : 50);
  const std::size_t max_bytes =
      argc > 4 ? std::strtoull(argv[4], nullptr, 10) : (std::size_t{256} << 20);
  LogCapture logs;
  Cluster c = make_cluster(n, logs, busy_poll);
  for (const Status& s : connect_all(c, 1)) {
    if (!s.is_ok()) {
      std::fprintf(stderr, "connect: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  std::printf("%-12s %12s %10s %10s %7s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s",
              "#wrong");
  std::uint64_t seq = 1;
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20,
                            std::size_t{16} << 20, std::size_t{64} << 20, std::size_t{256} << 20}) {
    if (bytes > max_bytes) break;
    const std::size_t count = bytes / sizeof(float);
    const int iters = bytes <= (64u << 10)   ? 2000
                      : bytes <= (1u << 20)  ? 200
                      : bytes <= (16u << 20) ? 20
                                             : 5;
    const int warmup = std::max(2, iters / 10);
    std::vector<double> secs(static_cast<std::size_t>(n));
    std::vector<int> wrong(static_cast<std::size_t>(n));
    auto st = run_ranks(n, [&](int r) {
      std::vector<float> buf(count);
      algorithms::CollectiveOptions opt;
      opt.algorithm = algorithm;
      std::uint64_t my_seq = seq;
      for (int it = 0; it < warmup + iters; ++it) {
        if (it == warmup)
          secs[r] =
              -std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
                   .count();
        std::fill(buf.begin(), buf.end(), static_cast<float>(r + 1));
        opt.seq = my_seq++;
        opt.deadline = Deadline::after(std::chrono::seconds(60));
        TRIB_RETURN_IF_ERROR(all_reduce(*c.links[r], buf.data(), buf.data(), count, DType::kFloat32,
                                        ReduceOp::kSum, opt));
      }
      secs[r] += std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
                     .count();
      const float expect = static_cast<float>(n * (n + 1) / 2);
      wrong[r] = static_cast<int>(
          std::count_if(buf.begin(), buf.end(), [&](float v) { return v != expect; }));
      return Status();
    });
    seq += static_cast<std::uint64_t>(warmup + iters);
    for (const Status& s : st) {
      if (!s.is_ok()) {
        std::fprintf(stderr, "all_reduce: %s\n", s.to_string().c_str());
        return 1;
      }
    }
    const double t = *std::max_element(secs.begin(), secs.end()) / iters;
    const double algbw = static_cast<double>(bytes) / t / 1e9;
    int total_wrong = 0;
    for (int w : wrong) total_wrong += w;
    std::printf("%-12zu %12.1f %10.3f %10.3f %7d\n", bytes, t * 1e6, algbw,
                algbw * 2.0 * (n - 1) / n, total_wrong);
  }
  std::uint64_t received = 0;
  for (const auto& p : c.endpoints[0]->stats().peers) received += p.bytes_received;
  std::printf("rank 0: %llu bytes received, %llu copied once more (arrived before their recv)\n",
              static_cast<unsigned long long>(received),
              static_cast<unsigned long long>(c.endpoints[0]->stats().bytes_copied_unexpected));
  return 0;
}
