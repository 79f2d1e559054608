#include "cli/soak_workload.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "agent/drain_on_sigterm.h"
#include "agent/elastic_loop.h"
#include "core/hash.h"

namespace tributary::cli {
namespace {

// Input element i of `member` at `step`: an integer in [-8, 7] (the top 4 bits of a
// per-member affine function of i), so sums over <= 2^20 contributors are exact in float32
// in any order and every member gets bitwise-identical results. The per-member multiplier
// and offset make a wrong contributor set show up in almost every element.
struct InputGen {
  std::uint32_t a;
  std::uint32_t b;
  InputGen(std::uint64_t member, std::int64_t step)
      : a(static_cast<std::uint32_t>(member * 2654435761u) | 1u),
        b(static_cast<std::uint32_t>(member * 40503u) ^
          static_cast<std::uint32_t>(static_cast<std::uint64_t>(step) * 2246822519u)) {}
  std::int32_t operator()(std::size_t i) const {
    return static_cast<std::int32_t>((static_cast<std::uint32_t>(i) * a + b) >> 28) - 8;
  }
};

// Registered state: where the cluster is, so joiners and rejoiners continue there.
struct Progress {
  std::int64_t step = 0;  // committed steps
};

using SoakClock = std::chrono::steady_clock;

// One all-reduce (sum) of this member's inputs for `step`, into `data`.
Result<agent::Outcome> step_once(agent::Worker& w, std::int64_t step, std::vector<float>& data) {
  const InputGen gen(w.member_id(), step);
  float* d = data.data();
  for (std::size_t i = 0; i < data.size(); ++i) d[i] = static_cast<float>(gen(i));
  return w.all_reduce(data.data(), data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
}

// Checks `data` against the reference sum over exactly the contributors `outcome` names
// and prints the step's line; false (and a log line saying how) when it differs.
bool check_step(std::FILE* out, const Logger& log, std::int64_t step, const agent::Outcome& outcome,
                const std::vector<float>& data, std::vector<std::int32_t>& reference) {
  const std::size_t count = data.size();
  std::fill(reference.begin(), reference.end(), 0);
  for (std::uint64_t id : outcome.contributor_ids) {
    const InputGen gen(id, step);
    std::int32_t* r = reference.data();
    for (std::size_t i = 0; i < count; ++i) r[i] += gen(i);
  }
  std::size_t bad = 0;
  std::size_t first_bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (data[i] != static_cast<float>(reference[i])) {
      if (bad++ == 0) first_bad = i;
    }
  }
  const bool ok =
      bad == 0 && static_cast<int>(outcome.contributor_ids.size()) == outcome.contributors;
  std::string ids;
  for (std::uint64_t id : outcome.contributor_ids) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(id);
  }
  std::fprintf(out, "soak step %lld view %llu contributors %s attempts %d sha256 %s %s\n",
               static_cast<long long>(step), static_cast<unsigned long long>(outcome.epoch),
               ids.c_str(), outcome.attempts,
               to_hex(Sha256::of(std::as_bytes(std::span(data)))).c_str(), ok ? "ok" : "WRONG");
  std::fflush(out);
  if (!ok) {
    log.logf(LogLevel::kError,
             "step %lld WRONG: %zu of %zu elements differ (first at %zu: got %g, want %d); %zu "
             "contributor ids for %d contributors",
             static_cast<long long>(step), bad, count, first_bad,
             bad ? static_cast<double>(data[first_bad]) : 0.0, bad ? reference[first_bad] : 0,
             outcome.contributor_ids.size(), outcome.contributors);
  }
  return ok;
}

}  // namespace

Status run_soak(const std::function<Result<std::unique_ptr<agent::Worker>>()>& start_worker,
                const SoakSpec& spec, std::FILE* out) {
  if (spec.count == 0) return error(StatusCode::kInvalidArgument, "soak: count must be positive");
  if (spec.steps < 0 && spec.duration_ms < 0) {
    return error(StatusCode::kInvalidArgument, "soak: give a number of steps or a duration");
  }
  // `data` doubles as the "parameters": it holds the last committed result at each step
  // boundary, is registered state, and so is what a joiner receives (and verifies).
  std::vector<float> data(spec.count, 0.0f);
  std::vector<std::int32_t> reference(spec.count);
  Progress progress;

  const auto start = SoakClock::now();
  const auto stop_at = spec.duration_ms >= 0 ? start + std::chrono::milliseconds(spec.duration_ms)
                                             : SoakClock::time_point::max();
  bool wrong = false;
  const Logger log("soak");

  agent::ElasticWorkload workload;
  workload.start_worker = start_worker;
  workload.position = [&] { return progress.step; };
  workload.register_state = [&](agent::Worker& w) {
    w.register_state("soak.progress", std::as_writable_bytes(std::span(&progress, 1)));
    w.register_state("soak.data", std::as_writable_bytes(std::span(data)));
    std::fprintf(out, "soak member %llu\n", static_cast<unsigned long long>(w.member_id()));
    std::fflush(out);
  };
  workload.step = [&](agent::Worker& w,
                      const agent::BoundaryOutcome&) -> Result<agent::StepResult> {
    if (spec.steps >= 0 && progress.step >= spec.steps) return agent::StepResult::kFinished;
    if (spec.step_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(spec.step_delay_ms));
    }
    TRIB_ASSIGN_OR_RETURN(const agent::Outcome outcome, step_once(w, progress.step, data));
    if (!check_step(out, log, progress.step, outcome, data, reference)) wrong = true;
    ++progress.step;
    // Time is up: leave through a drain, so the others see a boundary, not a failure.
    return SoakClock::now() >= stop_at ? agent::StepResult::kDrain : agent::StepResult::kContinue;
  };

  // After an eviction the coordinator may refuse a rejoin for a while (a straggler's
  // cool-down answers kUnavailable), and a joiner can itself be removed or time out while
  // the view it joins changes under it: joins are retried, the first one too, bounded.
  const auto rejoin_after = std::chrono::milliseconds(spec.rejoin_after_ms);
  agent::ElasticLoop loop(
      {.rejoin_delay = rejoin_after,
       .retry_delay = std::max<Duration>(rejoin_after, std::chrono::milliseconds(200)),
       .retry_first_join = true},
      log);
  // SIGTERM drains from the start: one that arrives while joining ends the run at once.
  const agent::DrainOnSigterm drain_on_sigterm(loop);
  TRIB_ASSIGN_OR_RETURN(const agent::ElasticReport report, loop.run(workload));
  if (report.left) {
    std::fprintf(out, "soak left after step %lld\n", static_cast<long long>(progress.step));
    std::fflush(out);
  }
  if (wrong)
    return error(StatusCode::kMismatch, "soak: a committed step differed from its reference");
  return Status::ok();
}

}  // namespace tributary::cli
