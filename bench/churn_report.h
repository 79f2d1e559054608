// The churn benchmark's results and its report: the Markdown table in
// bench/results/churn_*.md (per phase: committed steps, faults, re-runs, disagreements,
// hangs; per fault kind: min / median / p99 of time-to-detect and time-to-recover; the
// goals; every fault's own times, which bench/plots/plot_results.py draws).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tributary::bench {

struct Fault {
  // kill, stop, join, cut (--link-cuts), drain and coordinator (--control-faults)
  std::string kind;
  std::chrono::steady_clock::time_point at;
  std::uint64_t member = 0;  // the victim (kill/stop); the joiner, once known
  std::string who;           // the process: the victim, or the joiner (its name)
  std::optional<double> detect;
  std::optional<double> recover;
  // coordinator: the members of the last view, alive and running at the kill, that have
  // not resumed at the restarted coordinator yet (recovered once none is left)
  std::set<std::uint64_t> awaiting;
};

struct PhaseResult {
  std::string name;
  double seconds = 0;
  long committed = 0;  // distinct steps
  long first_step = -1, last_step = -1;
  long reruns = 0;
  long gaps = 0;
  long disagreements = 0;
  long wrong = 0;
  int hangs = 0;
  double longest_stall = 0;
  double mean_world = 0;
  std::vector<Fault> faults;
  int agents_started = 0;
  int unclean_exits = 0;
  int cuts = 0;        // --link-cuts: links cut
  int link_views = 0;  // views that removed a member neither killed nor frozen, or rebuilt links
  std::vector<std::string> notes;
};

struct Options {
  std::string tributary;
  double duration_s = 180;
  std::uint64_t seed = 0;
  int delay_ms = 20;
  long count = 1 << 20;
  int start_world = 5;
  std::string out;
  std::set<std::string> phases = {"free", "churn", "every10"};
  bool link_cuts = false;
  // The churn phase also drains agents (SIGTERM: leave at the next step boundary) and kills
  // the coordinator (kill -9, restarted at once on the same endpoint with its journal).
  bool control_faults = false;
  std::string log_dir;  // every process's lines, one file each; empty: none kept
};

// The Markdown report of a run.
std::string churn_report(const Options& o, const std::vector<PhaseResult>& results);

}  // namespace tributary::bench
