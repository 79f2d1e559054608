// One phase of the churn benchmark (bench/churn_bench.cc): a coordinator and soak agents
// on this machine, faults injected at random (or every 10 s, or none), and every line they
// print read through pipes and timestamped on arrival to measure detection, recovery and
// disagreements. See churn_bench.cc for what is measured.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace tributary::bench {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

struct Child;

struct Fault {
  std::string kind;  // kill, stop, join
  TimePoint at;
  std::uint64_t member = 0;  // the victim (kill/stop); the joiner, once known
  Child* who = nullptr;
  std::optional<double> detect;
  std::optional<double> recover;
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
};

// Runs phase `name` ("free", "churn" or "every10") for o.duration_s seconds.
PhaseResult run_phase(const Options& o, const std::string& name, std::mt19937_64& rng);

}  // namespace tributary::bench
