#include "bench/churn_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace tributary::bench {
namespace {

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

const char* fault_label(const std::string& kind) {
  if (kind == "join") return "join (admitted / first step)";
  if (kind == "drain") return "drain (SIGTERM: left / first step without it)";
  if (kind == "coordinator") return "coordinator kill -9 (listening again / all resumed)";
  return kind == "kill" ? "kill -9" : "SIGSTOP";
}

std::string seconds_or_dash(const std::optional<double>& v) {
  if (!v) return "-";
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f", *v);
  return b;
}

}  // namespace

std::string churn_report(const Options& o, const std::vector<PhaseResult>& results) {
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
  md << "Faults of the churn phase: kill -9, SIGSTOP (SIGCONT 3-5 s later), joins"
     << (o.control_faults ? ", drains (SIGTERM), coordinator kill -9 and restart" : "")
     << (o.link_cuts ? ", link cuts" : "") << "; one every 3-7 s.\n\n";
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
  if (o.link_cuts) {
    for (const auto& r : results) {
      std::snprintf(line, sizeof(line),
                    "- %s: %d link cuts (ss -K of an agent's first data address); views caused "
                    "by a link (a member removed that was neither killed nor frozen, or the "
                    "links rebuilt): %d\n",
                    r.name.c_str(), r.cuts, r.link_views);
      md << line;
    }
    md << "\n";
  }
  md << "Times in seconds, min / median / p99 (n = faults measured of faults injected).\n\n";
  md << "| phase | fault | n | time-to-detect | time-to-recover |\n|---|---|---|---|---|\n";
  std::map<std::string, std::vector<double>> all_recover;
  for (const auto& r : results) {
    for (const std::string kind : {"kill", "stop", "join", "drain", "coordinator"}) {
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
                    fault_label(kind), recover.size(), n, stats(detect).c_str(),
                    stats(recover).c_str());
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
  if (o.link_cuts) {
    long link_views = 0;
    for (const auto& r : results) link_views += r.link_views;
    md << "- zero views caused by a link: " << link_views
       << (link_views == 0 ? " (met)" : " (NOT met)") << "\n";
  }
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
  md << "\n## Every fault\n\nSeconds from each fault to its detection and to the recovery "
        "(\"-\": not seen); bench/plots/plot_results.py draws them.\n\n";
  md << "| phase | fault | time-to-detect (s) | time-to-recover (s) |\n|---|---|---|---|\n";
  for (const auto& r : results) {
    for (const auto& f : r.faults) {
      if (f.kind == "cut") continue;  // counted above; a link cut changes no view
      md << "| " << r.name << " | " << fault_label(f.kind) << " | " << seconds_or_dash(f.detect)
         << " | " << seconds_or_dash(f.recover) << " |\n";
    }
  }
  return md.str();
}

}  // namespace tributary::bench
