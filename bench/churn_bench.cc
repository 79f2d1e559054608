// The churn benchmark (not a test): a soak of a few minutes with random kill -9, SIGSTOP
// (SIGCONT a few seconds later) and joins at N between 3 and 8, against a failure-free run
// and a run with one kill -9 every 10 s, all in one invocation on this machine.
//
// Every line the coordinator and the agents print is read through pipes and timestamped
// on arrival. From those lines:
//   time-to-detect   fault -> the coordinator's first view without the victim
//                    (join: start -> the first view with the joiner)
//   time-to-recover  fault -> the first step a survivor commits without the victim
//                    (join: start -> the joiner's first committed step)
//   re-runs          collectives re-run after an abort (attempts - 1), summed
//   gaps             committed step numbers that never appeared
//   disagreements    steps printed with different hashes, views or contributors
//   wrong            "WRONG" lines (a result differs from its reference)
//   hangs            intervals of more than 30 s without a committed step
//   throughput       committed steps / s over the phase
//
// Usage: churn_bench --tributary PATH [--duration-s 180] [--seed S] [--delay-ms 20]
//                    [--count 1048576] [--out FILE] [--phases free,churn,every10]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/churn_phase.h"

namespace {

using namespace tributary::bench;

std::string stats(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5))];
  };
  char b[128];
  std::snprintf(b, sizeof(b), "%.3f / %.3f / %.3f", v.front(), at(0.5), at(0.99));
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tributary")
      o.tributary = next();
    else if (a == "--duration-s")
      o.duration_s = std::stod(next());
    else if (a == "--seed")
      o.seed = std::stoull(next());
    else if (a == "--delay-ms")
      o.delay_ms = std::stoi(next());
    else if (a == "--count")
      o.count = std::stol(next());
    else if (a == "--world")
      o.start_world = std::stoi(next());
    else if (a == "--out")
      o.out = next();
    else if (a == "--phases") {
      o.phases.clear();
      std::istringstream in(next());
      std::string p;
      while (std::getline(in, p, ',')) o.phases.insert(p);
    } else {
      std::fprintf(
          stderr,
          "usage: churn_bench --tributary PATH [--duration-s 180] [--seed S] [--delay-ms 20] "
          "[--count 1048576] [--world 5] [--out FILE] [--phases free,churn,every10]\n");
      return 2;
    }
  }
  if (o.tributary.empty()) {
    std::fprintf(stderr,
                 "churn_bench: --tributary PATH (the built tributary binary) is required\n");
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  std::mt19937_64 rng(o.seed);
  std::vector<PhaseResult> results;
  for (const std::string name : {"free", "churn", "every10"}) {
    if (!o.phases.count(name)) continue;
    std::fprintf(stderr, "churn_bench: phase %s (%.0f s)...\n", name.c_str(), o.duration_s);
    results.push_back(run_phase(o, name, rng));
  }

  std::ostringstream md;
  char line[512];
  md << "# Churn benchmark\n\n";
  std::snprintf(line, sizeof(line),
                "Soak workload: %ld float32 (%.1f MiB) sum all-reduce per step, %d ms compute per "
                "step, start at N = %d; "
                "%.0f s per phase; seed %llu.\n\n",
                o.count, static_cast<double>(o.count) * 4 / 1048576.0, o.delay_ms, o.start_world,
                o.duration_s, static_cast<unsigned long long>(o.seed));
  md << line;
  md << "| phase | seconds | committed steps | steps/s | mean N | faults | re-runs | gaps | "
        "disagreements | WRONG | hangs (>30 s) | longest stall (s) | unclean exits |\n";
  md << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  double free_rate = 0;
  for (const auto& r : results) {
    const double rate = r.seconds > 0 ? r.committed / r.seconds : 0;
    if (r.name == "free") free_rate = rate;
    std::snprintf(
        line, sizeof(line),
        "| %s | %.1f | %ld | %.2f | %.2f | %zu | %ld | %ld | %ld | %ld | %d | %.2f | %d |\n",
        r.name.c_str(), r.seconds, r.committed, rate, r.mean_world, r.faults.size(), r.reruns,
        r.gaps, r.disagreements, r.wrong, r.hangs, r.longest_stall, r.unclean_exits);
    md << line;
  }
  md << "\n";
  if (free_rate > 0) {
    for (const auto& r : results) {
      if (r.name == "free") continue;
      std::snprintf(line, sizeof(line), "- %s: throughput %.1f%% of failure-free\n", r.name.c_str(),
                    100.0 * (r.committed / std::max(1e-9, r.seconds)) / free_rate);
      md << line;
    }
    md << "\n";
  }
  md << "Times in seconds, min / median / p99 (n = faults measured of faults injected).\n\n";
  md << "| phase | fault | n | time-to-detect | time-to-recover |\n|---|---|---|---|---|\n";
  std::map<std::string, std::vector<double>> all_recover;
  for (const auto& r : results) {
    for (const std::string kind : {"kill", "stop", "join"}) {
      std::vector<double> detect, recover;
      int n = 0;
      for (const auto& f : r.faults) {
        if (f.kind != kind) continue;
        ++n;
        if (f.detect) detect.push_back(*f.detect);
        if (f.recover) recover.push_back(*f.recover);
      }
      if (n == 0) continue;
      all_recover[kind].insert(all_recover[kind].end(), recover.begin(), recover.end());
      std::snprintf(line, sizeof(line), "| %s | %s | %zu/%d | %s | %s |\n", r.name.c_str(),
                    kind == "join" ? "join (admitted / first step)"
                                   : (kind == "kill" ? "kill -9" : "SIGSTOP"),
                    recover.size(), n, stats(detect).c_str(), stats(recover).c_str());
      md << line;
    }
  }
  md << "\n## Goals\n\n";
  auto median = [](std::vector<double> v) {
    if (v.empty()) return -1.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  long disagreements = 0, hangs = 0;
  for (const auto& r : results) {
    disagreements += r.disagreements + r.wrong;
    hangs += r.hangs;
  }
  const double mk = median(all_recover["kill"]), ms = median(all_recover["stop"]);
  std::snprintf(line, sizeof(line), "- median time-to-recover after kill -9 <= 1 s: %.3f s (%s)\n",
                mk, mk >= 0 && mk <= 1.0 ? "met" : "NOT met");
  md << line;
  std::snprintf(line, sizeof(line), "- median time-to-recover after SIGSTOP <= 2 s: %.3f s (%s)\n",
                ms, ms >= 0 && ms <= 2.0 ? "met" : "NOT met");
  md << line;
  md << "- zero disagreements: " << disagreements << (disagreements == 0 ? " (met)" : " (NOT met)")
     << "\n";
  md << "- zero hangs: " << hangs << (hangs == 0 ? " (met)" : " (NOT met)") << "\n";
  for (const auto& r : results) {
    if (r.name != "every10" || free_rate <= 0) continue;
    const double pct = 100.0 * (r.committed / std::max(1e-9, r.seconds)) / free_rate;
    std::snprintf(line, sizeof(line),
                  "- throughput with one failure every 10 s >= 80%% of failure-free: %.1f%% (%s)\n",
                  pct, pct >= 80 ? "met" : "NOT met");
    md << line;
  }
  bool notes = false;
  for (const auto& r : results) {
    for (const auto& n : r.notes) {
      if (!notes) md << "\n## Notes\n\n";
      notes = true;
      md << "- " << r.name << ": " << n << "\n";
    }
  }
  const std::string report = md.str();
  std::fputs(report.c_str(), stdout);
  if (!o.out.empty()) {
    std::ofstream(o.out) << report;
  }
  return 0;
}
