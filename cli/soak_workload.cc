#include "cli/soak_workload.h"

#include <openssl/evp.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cli/train_workload.h"  // set_drain_target: SIGTERM drains the current Worker

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

std::string sha256_hex(const void* data, std::size_t bytes) {
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_Digest(data, bytes, digest, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (unsigned i = 0; i < len; ++i) {
    s += kHex[digest[i] >> 4];
    s += kHex[digest[i] & 15];
  }
  return s;
}

// Registered state: where the cluster is, so joiners and rejoiners continue there.
struct Progress {
  std::int64_t step = 0;  // committed steps
};

using SoakClock = std::chrono::steady_clock;

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
  // SIGTERM drains from the start: one that arrives while joining takes effect once
  // the Worker is up (set_drain_target remembers it).
  set_drain_target(nullptr);
  std::unique_ptr<agent::Worker> worker;
  bool wrong = false;
  bool drain_for_time = false;

  for (;;) {
    if (!worker) {
      // After an eviction the coordinator may refuse a rejoin for a while (a straggler's
      // cool-down answers kUnavailable), and a joiner can itself be removed or time out
      // while the view it joins changes under it: keep trying, bounded.
      const auto give_up = SoakClock::now() + std::chrono::seconds(120);
      for (;;) {
        auto w = start_worker();
        if (w) {
          worker = std::move(*w);
          break;
        }
        const StatusCode code = w.status().code();
        const bool transient = code == StatusCode::kUnavailable || code == StatusCode::kEvicted ||
                               code == StatusCode::kTimedOut;
        if (!transient || SoakClock::now() >= give_up) {
          return w.status();
        }
        std::fprintf(stderr, "tributary[soak]: join refused (%s); retrying\n",
                     w.status().to_string().c_str());
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::max<long>(spec.rejoin_after_ms, 200)));
      }
      worker->register_state("soak.progress", std::as_writable_bytes(std::span(&progress, 1)));
      worker->register_state("soak.data", std::as_writable_bytes(std::span(data)));
      set_drain_target(worker.get());
      std::fprintf(out, "soak member %llu\n", static_cast<unsigned long long>(worker->member_id()));
      std::fflush(out);
    }
    agent::Worker& w = *worker;
    if (!drain_for_time && SoakClock::now() >= stop_at) {
      // Time is up: leave through a drain, so the others see a boundary, not a failure.
      drain_for_time = true;
      w.drain();
    }
    auto boundary = w.step_boundary();
    if (!boundary) {
      if (boundary.status().code() == StatusCode::kEvicted) {
        std::fprintf(stderr, "tributary[soak]: evicted at step %lld (%s); rejoining in %ld ms\n",
                     static_cast<long long>(progress.step), boundary.status().message().c_str(),
                     spec.rejoin_after_ms);
        set_drain_target(nullptr);
        worker.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(spec.rejoin_after_ms));
        continue;
      }
      set_drain_target(nullptr);
      return boundary.status();
    }
    if (boundary->left) {
      set_drain_target(nullptr);
      std::fprintf(stderr, "tributary[soak]: drained after step %lld and left the cluster\n",
                   static_cast<long long>(progress.step));
      std::fprintf(out, "soak left after step %lld\n", static_cast<long long>(progress.step));
      std::fflush(out);
      worker.reset();
      break;
    }
    if (spec.steps >= 0 && progress.step >= spec.steps) break;

    if (spec.step_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(spec.step_delay_ms));
    }
    const std::int64_t step = progress.step;
    {
      const InputGen gen(w.member_id(), step);
      float* d = data.data();
      for (std::size_t i = 0; i < spec.count; ++i) d[i] = static_cast<float>(gen(i));
    }
    auto outcome =
        w.all_reduce(data.data(), data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
    if (!outcome) {
      if (outcome.status().code() == StatusCode::kEvicted) continue;  // the boundary rejoins
      set_drain_target(nullptr);
      return outcome.status();
    }

    // The reference: exactly the contributors the outcome names, each input recomputed.
    std::fill(reference.begin(), reference.end(), 0);
    for (std::uint64_t id : outcome->contributor_ids) {
      const InputGen gen(id, step);
      std::int32_t* r = reference.data();
      for (std::size_t i = 0; i < spec.count; ++i) r[i] += gen(i);
    }
    std::size_t bad = 0;
    std::size_t first_bad = 0;
    for (std::size_t i = 0; i < spec.count; ++i) {
      if (data[i] != static_cast<float>(reference[i])) {
        if (bad++ == 0) first_bad = i;
      }
    }
    const bool ok =
        bad == 0 && static_cast<int>(outcome->contributor_ids.size()) == outcome->contributors;
    std::string ids;
    for (std::uint64_t id : outcome->contributor_ids) {
      ids += (ids.empty() ? "" : ",") + std::to_string(id);
    }
    std::fprintf(out, "soak step %lld view %llu contributors %s attempts %d sha256 %s %s\n",
                 static_cast<long long>(step), static_cast<unsigned long long>(outcome->epoch),
                 ids.c_str(), outcome->attempts,
                 sha256_hex(data.data(), data.size() * sizeof(float)).c_str(), ok ? "ok" : "WRONG");
    std::fflush(out);
    if (!ok) {
      wrong = true;
      std::fprintf(
          stderr,
          "tributary[soak]: step %lld WRONG: %zu of %zu elements differ (first at %zu: got "
          "%g, want %d); %zu contributor ids for %d contributors\n",
          static_cast<long long>(step), bad, spec.count, first_bad,
          bad ? static_cast<double>(data[first_bad]) : 0.0, bad ? reference[first_bad] : 0,
          outcome->contributor_ids.size(), outcome->contributors);
    }
    ++progress.step;
  }

  set_drain_target(nullptr);
  if (worker) {
    if (Status s = worker->leave(); !s) return s;
  }
  if (wrong)
    return error(StatusCode::kMismatch, "soak: a committed step differed from its reference");
  return Status::ok();
}

}  // namespace tributary::cli
