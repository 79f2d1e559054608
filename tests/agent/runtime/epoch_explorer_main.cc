// epoch_explorer: runs the schedule explorer (schedule_explorer.h) over many seeds.
//   epoch_explorer [--first S] [--count N] [--seed S --trace] [--members MIN-MAX]
//                  [--calls C] [--faults F] [--no-kills] [--no-freezes] [--no-links]
//                  [--no-restarts] [--no-joins] [--no-drains]
// Prints a summary line every 100000 schedules and every violation with its seed; exits 1
// when any schedule broke an invariant.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/agent/runtime/schedule_explorer.h"

using namespace tributary::agent::runtime;

int main(int argc, char** argv) {
  ExplorerOptions o;
  std::uint64_t first = 1, count = 10000;
  bool single = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--first")
      first = std::stoull(next());
    else if (a == "--count")
      count = std::stoull(next());
    else if (a == "--seed") {
      first = std::stoull(next());
      count = 1;
      single = true;
    } else if (a == "--trace")
      o.trace = true;
    else if (a == "--calls")
      o.calls = std::stoi(next());
    else if (a == "--faults")
      o.max_faults = std::stoi(next());
    else if (a == "--members") {
      const std::string v = next();
      const auto dash = v.find('-');
      o.min_members = std::stoi(v.substr(0, dash));
      o.max_members = dash == std::string::npos ? o.min_members : std::stoi(v.substr(dash + 1));
    } else if (a == "--no-kills")
      o.kills = false;
    else if (a == "--no-freezes")
      o.freezes = false;
    else if (a == "--no-links")
      o.link_failures = false;
    else if (a == "--no-restarts")
      o.coordinator_restarts = false;
    else if (a == "--no-joins")
      o.joins = false;
    else if (a == "--no-drains")
      o.drains = false;
    else {
      std::fprintf(stderr, "unknown flag %s (see the comment at the top of %s)\n", a.c_str(),
                   __FILE__);
      return 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  ExplorerTotals totals;
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    const ScheduleResult r = explore(seed, o);
    totals.add(r);
    if (single || !r.ok) {
      for (const auto& line : r.trace) std::printf("%s\n", line.c_str());
      std::printf(
          "seed %llu: %d members, %d kills, %d freezes, %d link failures, %d restarts, "
          "%d joins, %d drains, %d views, %d boundaries, %d returns (%d speculative, "
          "%d re-run), %d repairs: %s\n",
          static_cast<unsigned long long>(seed), r.members, r.kills, r.freezes, r.link_failures,
          r.restarts, r.joins, r.drains, r.views, r.boundaries, r.returns, r.speculative, r.reruns,
          r.repaired, r.ok ? "ok" : "VIOLATED");
      for (const auto& v : r.violations) std::printf("  %s\n", v.c_str());
    }
    if (totals.schedules % 100000 == 0 || totals.schedules == count) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%llu schedules (seeds %llu..%llu) in %.1f s: %s\n",
                  static_cast<unsigned long long>(totals.schedules),
                  static_cast<unsigned long long>(first), static_cast<unsigned long long>(seed), s,
                  totals.summary().c_str());
      std::fflush(stdout);
    }
  }
  return totals.violated == 0 ? 0 : 1;
}
