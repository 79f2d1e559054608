// compressed_allreduce_bench: one rank of an end-to-end compressed all-reduce over real
// TCP links (TcpEndpoint + compressed_all_reduce), for bench/shaped_link.sh, which starts
// one process per network namespace. Standalone so that no agent flag is needed.
//
//   compressed_allreduce_bench --rank R --size N --rendezvous DIR [--bind HOST]
//       [--mib 64] [--iters 3] [--warmup 1] [--codecs float32,float32@ring,qint8,topk:density=0.01]
//       [--secret S] [--timeout-s 600] [--zones 0,0,0,1,1,1]
//
// Rendezvous: each rank listens on an ephemeral port of --bind, writes "host:port" to
// DIR/rank<R> (atomically, by rename) and waits for every other rank's file.
//
// Per codec: --warmup untimed runs, then --iters timed runs, each preceded by a barrier;
// the time of a run is its maximum over ranks (nccl-tests style), and the reported time is
// the mean over timed runs. "spec@ring" (any algorithm name) forces the algorithm of the
// dense all-reduces inside; speedups are against the fastest float32 row. --zones gives
// each rank's zone (CollectiveOptions::zones); "float32@hierarchical+qint8" runs the two
// tiers, float32 inside the zones and the codec after '+' across them (docs/zones.md).
// Goodput is on the uncompressed size; wire MiB is what this rank handed to the link per
// run (two tiers: what it sent across zones). The check column
// compares every rank's result bits
// (#wrong ranks) and the relative L2 error against the exact float64 average.
// Output on rank 0: a Markdown table.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp/tcp_endpoint.h"
#include "algorithms/collectives.h"
#include "compression/collectives/compressed_all_reduce.h"
#include "core/hash.h"

namespace {

using namespace tributary;
using namespace tributary::compression;
using namespace tributary::compression::collectives;
using SteadyTime = std::chrono::steady_clock;

struct Args {
  int rank = -1;
  int size = 0;
  std::string rendezvous;
  std::string bind = "127.0.0.1";
  double mib = 64;
  int iters = 3;
  int warmup = 1;
  std::string codecs = "float32,qint8:bucket=512,topk:density=0.01";
  std::string secret = "tributary-bench";
  int timeout_s = 600;
  std::vector<int> zones;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "compressed_allreduce_bench: %s\n", why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + k).c_str());
    const std::string v = argv[++i];
    if (k == "--rank")
      a.rank = std::atoi(v.c_str());
    else if (k == "--size")
      a.size = std::atoi(v.c_str());
    else if (k == "--rendezvous")
      a.rendezvous = v;
    else if (k == "--bind")
      a.bind = v;
    else if (k == "--mib")
      a.mib = std::atof(v.c_str());
    else if (k == "--iters")
      a.iters = std::atoi(v.c_str());
    else if (k == "--warmup")
      a.warmup = std::atoi(v.c_str());
    else if (k == "--codecs")
      a.codecs = v;
    else if (k == "--secret")
      a.secret = v;
    else if (k == "--timeout-s")
      a.timeout_s = std::atoi(v.c_str());
    else if (k == "--zones") {
      std::stringstream zs(v);
      std::string z;
      while (std::getline(zs, z, ',')) a.zones.push_back(std::atoi(z.c_str()));
    } else
      usage(("unknown flag " + k).c_str());
  }
  if (a.size < 1 || a.rank < 0 || a.rank >= a.size) usage("need --size N >= 1 and 0 <= --rank < N");
  if (a.rendezvous.empty()) usage("need --rendezvous DIR");
  if (a.iters < 1 || a.warmup < 0 || !(a.mib > 0)) usage("bad --iters/--warmup/--mib");
  if (!a.zones.empty() && static_cast<int>(a.zones.size()) != a.size)
    usage("--zones needs one zone per rank");
  return a;
}

// Codec specs are separated by ',' but specs contain ',' too: a new spec starts at a
// known codec name.
std::vector<std::string> split_specs(const std::string& s) {
  static const char* names[] = {"float32", "float16", "bfloat16", "qint8",
                                "qint4",   "topk",    "sign",     "powersgd"};
  std::vector<std::string> out;
  std::string cur;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool starts = false;
    for (const char* n : names) {
      const std::string name = n;
      if (item == name || item.rfind(name + ":", 0) == 0 || item.rfind(name + "@", 0) == 0)
        starts = true;
    }
    if (starts && !cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
    cur += (cur.empty() ? "" : ",") + item;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::vector<std::string> rendezvous(const Args& a, const std::string& me) {
  namespace fs = std::filesystem;
  const fs::path dir(a.rendezvous);
  const fs::path tmp = dir / (".rank" + std::to_string(a.rank) + ".tmp");
  {
    std::ofstream f(tmp);
    f << me << "\n";
  }
  fs::rename(tmp, dir / ("rank" + std::to_string(a.rank)));
  std::vector<std::string> addrs(static_cast<std::size_t>(a.size));
  const auto until = SteadyTime::now() + std::chrono::seconds(a.timeout_s);
  for (int r = 0; r < a.size; ++r) {
    const fs::path p = dir / ("rank" + std::to_string(r));
    while (!fs::exists(p)) {
      if (SteadyTime::now() > until) usage(("rendezvous: no " + p.string()).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::ifstream f(p);
    std::getline(f, addrs[static_cast<std::size_t>(r)]);
  }
  return addrs;
}

std::vector<float> input_of(int rank, std::size_t count) {
  std::mt19937 gen(1000u + static_cast<unsigned>(rank));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = d(gen);
  return v;
}

void check(const Status& s, const char* what) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "compressed_allreduce_bench: %s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const auto count = static_cast<std::size_t>(a.mib * 1024 * 1024 / 4);

  transport::TcpEndpointConfig config;
  config.bind_host = a.bind;
  config.port = 0;
  config.secret = a.secret;
  auto endpoint = transport::TcpEndpoint::listen(config);
  check(endpoint.status(), "listen");
  const auto addrs = rendezvous(a, (*endpoint)->address());
  auto link_or = (*endpoint)->connect_group(1, a.rank, addrs,
                                            Deadline::after(std::chrono::seconds(a.timeout_s)));
  check(link_or.status(), "connect_group");
  algorithms::Link& link = **link_or;

  const std::vector<float> input = input_of(a.rank, count);
  // The exact average, for the error column (every rank can regenerate every input).
  std::vector<double> exact(count, 0.0);
  if (a.rank == 0) {
    for (int r = 0; r < a.size; ++r) {
      const auto v = r == a.rank ? input : input_of(r, count);
      for (std::size_t i = 0; i < count; ++i) exact[i] += v[i];
    }
    for (double& x : exact) x /= a.size;
  }

  std::uint64_t seq = 1;
  auto opts = [&](std::uint64_t s) {
    algorithms::CollectiveOptions o;
    o.seq = s;
    o.deadline = Deadline::after(std::chrono::seconds(a.timeout_s));
    return o;
  };

  if (a.rank == 0) {
    std::printf(
        "| codec | ranks | MiB | time (s) | goodput (MB/s) | wire MiB sent/rank | speedup | #wrong "
        "| rel. L2 error |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  double baseline = 0;
  std::vector<float> buf(count);
  for (const std::string& item : split_specs(a.codecs)) {
    // "spec@algorithm" forces the all-reduce algorithm of the dense collectives inside.
    const std::size_t at = item.find('@');
    const std::size_t plus = item.find('+', at == std::string::npos ? 0 : at);
    const std::string spec = item.substr(0, std::min(at, plus));
    algorithms::AllReduceAlgorithm algorithm = algorithms::AllReduceAlgorithm::kAuto;
    if (at != std::string::npos &&
        !algorithms::parse_all_reduce_algorithm(item.substr(at + 1, plus - at - 1), &algorithm)) {
      usage(("unknown algorithm in " + item).c_str());
    }
    auto plan = CompressionPlan::parse(spec);
    check(plan.status(), spec.c_str());
    std::optional<CompressionPlan> wan_plan;
    if (plus != std::string::npos) {
      auto w = CompressionPlan::parse(item.substr(plus + 1));
      check(w.status(), item.c_str());
      wan_plan = std::move(*w);
    }
    CompressionState state;
    CompressionState wan_state;
    CompressionStats stats;
    double total = 0;
    for (int it = 0; it < a.warmup + a.iters; ++it) {
      std::memcpy(buf.data(), input.data(), count * sizeof(float));
      check(barrier(link, opts(seq++)), "barrier");
      CompressionContext ctx;
      ctx.plan = &*plan;
      ctx.state = &state;
      ctx.tensor_id = 1;
      ctx.step = static_cast<std::uint64_t>(it) + 1000;  // past any top-k warm-up
      ctx.seed = 7;
      ctx.stats = &stats;
      CompressionContext wan = ctx;
      if (wan_plan) {
        wan.plan = &*wan_plan;
        wan.state = &wan_state;
        wan.stats = nullptr;
        ctx.wan = &wan;
      }
      algorithms::CollectiveOptions o = opts(seq);
      o.algorithm = algorithm;
      o.zones = a.zones;
      const auto t0 = SteadyTime::now();
      check(compressed_all_reduce(link, buf.data(), count, ReduceOp::kAvg, ctx, o), spec.c_str());
      double t = std::chrono::duration<double>(SteadyTime::now() - t0).count();
      seq += 1;
      check(all_reduce(link, &t, &t, 1, DType::kFloat64, ReduceOp::kMax, opts(seq++)), "time max");
      if (it >= a.warmup) total += t;
    }
    const double mean = total / a.iters;
    // Every rank's result bits: gather the hashes.
    const std::uint64_t h = fnv1a64(std::as_bytes(std::span(buf)));
    std::vector<std::uint64_t> hashes(static_cast<std::size_t>(a.size));
    check(all_gather(link, &h, hashes.data(), 1, DType::kInt64, opts(seq++)), "hash gather");
    int wrong = 0;
    for (std::uint64_t x : hashes) wrong += x != hashes[0];
    if (a.rank == 0) {
      double err = 0, norm = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const double d = buf[i] - exact[i];
        err += d * d;
        norm += exact[i] * exact[i];
      }
      // Speedups against the fastest float32 row so far (the best uncompressed algorithm).
      if (spec == "float32" && (baseline == 0 || mean < baseline)) baseline = mean;
      const std::string label =
          plan->spec + (at == std::string::npos ? "" : " @" + item.substr(at + 1));
      const double wire = wan_plan ? stats.cross_zone_wire_bytes : stats.wire_bytes_sent;
      std::printf("| %s | %d | %.0f | %.3f | %.1f | %.2f | %s | %d | %.2e |\n", label.c_str(),
                  a.size, a.mib, mean, count * 4.0 / mean / 1e6, wire / 1048576.0,
                  baseline > 0 ? (std::to_string(baseline / mean).substr(0, 5) + "x").c_str() : "-",
                  wrong, std::sqrt(err / norm));
      std::fflush(stdout);
    }
  }
  check(barrier(link, opts(seq++)), "final barrier");
  return 0;
}
