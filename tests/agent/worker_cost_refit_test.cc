// The cost model refitted as collectives run (docs/algorithms.md, "Refitting as collectives
// run"): real Workers (ranks as threads) over the in-process control plane and one in-memory
// fabric per epoch (WorkerEnvironment::connect_links) whose every message arrives kDelay
// after it was sent. The link probe reads that delay as a busy fast link and keeps the
// default constants; the all-reduces take far longer than the defaults predict. After some
// steps (a step boundary, then all-reduces of three sizes) every member must hold exactly
// the same model, and its predictions must have moved toward what the all-reduces took.
// A view change drops the refit (new links), and the members of the new view refit again.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "agent/worker.h"
#include "algorithms/cost_model.h"
#include "algorithms/memory_link.h"
#include "control_client/memory_control_plane.h"
#include "tests/agent/epoch_fabrics.h"
#include "tests/agent/in_process_world.h"

namespace tributary::agent {
namespace {

using algorithms::AllReduceAlgorithm;
using algorithms::MemoryFabric;
using control_client::MemoryCoordinator;

// Below the probe's threshold for adopting a measured latency (CostModel::fitted_to: 40 x
// 5 us), so that the probe keeps the defaults and only the refit moves the model.
constexpr auto kDelay = std::chrono::microseconds(150);
const std::vector<std::size_t> kSizes = {1024, 16 * 1024, 256 * 1024};
constexpr AllReduceAlgorithm kPredicted[] = {AllReduceAlgorithm::kAuto,
                                             AllReduceAlgorithm::kRing,
                                             AllReduceAlgorithm::kTree,
                                             AllReduceAlgorithm::kDoubleTree,
                                             AllReduceAlgorithm::kHalvingDoubling,
                                             AllReduceAlgorithm::kDirect};

// One MemoryFabric per epoch, every rank's messages delayed.
in_process::EpochFabrics delayed_fabrics() {
  return in_process::EpochFabrics([](MemoryFabric& f) {
    for (int r = 0; r < f.size(); ++r) f.set_delay(r, kDelay);
  });
}
using in_process::EpochFabrics;

std::vector<std::unique_ptr<Worker>> start_world(MemoryCoordinator& coordinator,
                                                 EpochFabrics& fabrics, int n,
                                                 bool measure_links) {
  return in_process::start_world(
      coordinator, n,
      {.configure = [measure_links](int, WorkerConfig& c) { c.measure_links = measure_links; },
       .connect_links = in_process::fabric_links(fabrics)});
}

// What a Worker's model predicts for every size and algorithm (kPredicted), in that order.
std::vector<double> predictions(const Worker& w) {
  std::vector<double> p;
  for (std::size_t bytes : kSizes) {
    for (AllReduceAlgorithm a : kPredicted) p.push_back(w.predicted_all_reduce_seconds(bytes, a));
  }
  return p;
}
double predicted(const std::vector<double>& p, std::size_t size_index, AllReduceAlgorithm a) {
  const auto i = static_cast<std::size_t>(
      std::find(std::begin(kPredicted), std::end(kPredicted), a) - std::begin(kPredicted));
  return p.at(size_index * std::size(kPredicted) + i);
}

struct RankLog {
  std::vector<std::vector<double>> after_boundary;  // predictions after each step's boundary
  // The fastest all-reduce of each (size index, algorithm), over every step, in seconds.
  std::map<std::pair<std::size_t, AllReduceAlgorithm>, double> fastest;
  std::vector<AllReduceAlgorithm> last_algorithm;  // by size index, in the last step
  std::vector<std::set<AllReduceAlgorithm>> ran;   // by size index, every algorithm that ran
  bool ok = true;
};

// `steps` steps on every member, then one more step boundary: each step is a boundary and
// one float32 sum all-reduce of each size.
std::vector<RankLog> run_steps(std::vector<std::unique_ptr<Worker>>& workers, int steps,
                               const std::vector<std::size_t>& sizes = kSizes) {
  std::vector<RankLog> logs(workers.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < workers.size(); ++r) {
    threads.emplace_back([&, r] {
      Worker& w = *workers[r];
      RankLog& log = logs[r];
      log.last_algorithm.assign(sizes.size(), AllReduceAlgorithm::kAuto);
      log.ran.assign(sizes.size(), {});
      for (int s = 0; s <= steps; ++s) {
        auto b = w.step_boundary();
        if (!b.is_ok() || b->view_changed) {
          ADD_FAILURE() << "rank " << r << " step " << s
                        << " boundary: " << (b.is_ok() ? "view changed" : b.status().to_string());
          log.ok = false;
          return;
        }
        log.after_boundary.push_back(predictions(w));
        if (s == steps) return;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          std::vector<float> data(sizes[i] / sizeof(float), 1.0f);
          // What the model in use chooses: the all-reduce must run exactly that, also right
          // after a refit or a view change (the Worker keeps its choices per size).
          const double chosen = w.predicted_all_reduce_seconds(sizes[i], AllReduceAlgorithm::kAuto);
          const auto t0 = std::chrono::steady_clock::now();
          auto o =
              w.all_reduce(data.data(), data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (!o.is_ok() || data[0] != static_cast<float>(workers.size())) {
            ADD_FAILURE() << "rank " << r << " step " << s << " all_reduce of " << sizes[i]
                          << " B: " << (o.is_ok() ? "wrong sum" : o.status().to_string());
            log.ok = false;
            return;
          }
          EXPECT_EQ(w.predicted_all_reduce_seconds(sizes[i], o->algorithm), chosen)
              << "rank " << r << " step " << s << " ran " << to_string(o->algorithm) << " for "
              << sizes[i] << " B, not the choice of the model in use";
          auto [it, fresh] = log.fastest.try_emplace({i, o->algorithm}, seconds);
          if (!fresh) it->second = std::min(it->second, seconds);
          log.last_algorithm[i] = o->algorithm;
          log.ran[i].insert(o->algorithm);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  return logs;
}

// Every member held exactly the same model after every boundary.
void expect_agreed(const std::vector<RankLog>& logs) {
  for (std::size_t r = 1; r < logs.size(); ++r) {
    ASSERT_EQ(logs[r].after_boundary.size(), logs[0].after_boundary.size());
    for (std::size_t s = 0; s < logs[0].after_boundary.size(); ++s) {
      EXPECT_EQ(logs[r].after_boundary[s], logs[0].after_boundary[s])
          << "rank " << r << " and rank 0 hold different models after boundary " << s;
    }
  }
}

// For each size, the algorithm that ran last: the refitted model's prediction is closer to
// the fastest measured run (by ratio) than the model before the refit.
void expect_closer(const std::vector<RankLog>& logs, const std::vector<double>& before,
                   const std::vector<double>& after) {
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    const AllReduceAlgorithm a = logs[0].last_algorithm[i];
    double measured = std::numeric_limits<double>::infinity();
    for (const RankLog& log : logs) measured = std::min(measured, log.fastest.at({i, a}));
    const double was = predicted(before, i, a);
    const double now = predicted(after, i, a);
    std::printf(
        "%7zu B %-16s measured %9.1f us, predicted %9.1f us before the refit, %9.1f after\n",
        kSizes[i], std::string(to_string(a)).c_str(), measured * 1e6, was * 1e6, now * 1e6);
    EXPECT_LT(std::abs(std::log(now / measured)), std::abs(std::log(was / measured)))
        << kSizes[i] << " B " << to_string(a);
    // The right order of magnitude (the model before the refit was 30-40x off): a ranking
    // device, not a stopwatch. Not tighter: the members agree on the smallest fit, and with
    // the suite's other tests on the same 2 cores one member's fit has come out 4.7x below
    // the fastest run of the view (3x held only on an idle machine).
    EXPECT_LT(std::abs(std::log(now / measured)), std::log(8.0))
        << kSizes[i] << " B " << to_string(a);
  }
}

TEST(WorkerCostRefit, MembersAgreeOnARefitTowardTheMeasuredTimes) {
  constexpr int kN = 4;
  constexpr int kSteps = 8;  // 3 observations a step: a fit from the boundary of step 3 on
  MemoryCoordinator coordinator(in_process::membership_config(kN));
  EpochFabrics fabrics = delayed_fabrics();
  auto workers = start_world(coordinator, fabrics, kN, /*measure_links=*/true);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  const auto started = std::chrono::steady_clock::now();

  std::vector<RankLog> logs = run_steps(workers, kSteps);
  for (const RankLog& log : logs) ASSERT_TRUE(log.ok);
  expect_agreed(logs);
  const std::vector<double>& before = logs[0].after_boundary.front();
  const std::vector<double>& after = logs[0].after_boundary.back();
  ASSERT_NE(before, after) << "no refit";
  expect_closer(logs, before, after);

  // A drain changes the view: the new links are measured afresh and the refit is dropped
  // (the 1 KiB all-reduce is priced by the probe's model again, far below the refit's),
  // then the three members of the new view refit among themselves.
  const double refit_1k = predicted(after, 0, AllReduceAlgorithm::kAuto);
  workers[kN - 1]->drain();
  {
    std::vector<std::thread> threads;
    std::vector<Result<BoundaryOutcome>> b(kN, error(StatusCode::kInternal, "not run"));
    for (int r = 0; r < kN; ++r) {
      threads.emplace_back([&, r] {
        b[static_cast<std::size_t>(r)] = workers[static_cast<std::size_t>(r)]->step_boundary();
      });
    }
    for (auto& th : threads) th.join();
    for (int r = 0; r < kN; ++r)
      ASSERT_TRUE(b[static_cast<std::size_t>(r)].is_ok())
          << b[static_cast<std::size_t>(r)].status().to_string();
    ASSERT_TRUE(b[kN - 1]->left);
  }
  workers[kN - 1].reset();
  std::vector<std::unique_ptr<Worker>> stayed(kN - 1);
  for (int r = 0; r < kN - 1; ++r) {
    auto& w = workers[static_cast<std::size_t>(r)];
    ASSERT_EQ(w->size(), kN - 1);
    const auto rank = static_cast<std::size_t>(w->rank());
    stayed.at(rank) = std::move(w);
  }
  logs = run_steps(stayed, kSteps);
  for (const RankLog& log : logs) ASSERT_TRUE(log.ok);
  expect_agreed(logs);
  const std::vector<double>& reset = logs[0].after_boundary.front();
  EXPECT_LT(predicted(reset, 0, AllReduceAlgorithm::kAuto), 0.5 * refit_1k)
      << "the refit of the old view survived the view change";
  ASSERT_NE(reset, logs[0].after_boundary.back()) << "no refit in the new view";
  expect_closer(logs, reset, logs[0].after_boundary.back());
  in_process::leave_all(stayed);
  std::printf("%.2f s of steps\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

// The Worker keeps its choice per size until the model or the view changes: a refit that
// changes the choice for 4 MiB (the delayed links make every message dear) must be followed
// by the very next all-reduce of that size, on every member (else the members would run what
// the model no longer prefers, or fail each other's checks).
TEST(WorkerCostRefit, EveryAllReduceRunsTheChoiceOfTheModelInUse) {
  constexpr int kN = 4;
  MemoryCoordinator coordinator(in_process::membership_config(kN));
  EpochFabrics fabrics = delayed_fabrics();
  auto workers = start_world(coordinator, fabrics, kN, /*measure_links=*/true);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  const std::vector<std::size_t> sizes = {1024, std::size_t{4} << 20};
  std::vector<RankLog> logs = run_steps(workers, 8, sizes);
  for (const RankLog& log : logs) ASSERT_TRUE(log.ok);
  // The test means something only if a refit moved a choice.
  EXPECT_GE(logs[0].ran[1].size(), 2u) << "no refit changed the choice for 4 MiB";
  in_process::leave_all(workers);
}

// Without link measurement the model stays the default, whatever the all-reduces take.
TEST(WorkerCostRefit, NoRefitWithoutLinkMeasurement) {
  constexpr int kN = 3;
  MemoryCoordinator coordinator(in_process::membership_config(kN));
  EpochFabrics fabrics = delayed_fabrics();
  auto workers = start_world(coordinator, fabrics, kN, /*measure_links=*/false);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  const std::vector<RankLog> logs = run_steps(workers, 6);
  for (const RankLog& log : logs) ASSERT_TRUE(log.ok);
  expect_agreed(logs);
  const algorithms::CostModel& model = algorithms::CostModel::default_model();
  for (const auto& p : logs[0].after_boundary) {
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      EXPECT_EQ(predicted(p, i, AllReduceAlgorithm::kTree),
                model.predict(AllReduceAlgorithm::kTree, kN, kSizes[i]));
      EXPECT_EQ(predicted(p, i, AllReduceAlgorithm::kAuto),
                model.predict(model.choose(kN, kSizes[i]), kN, kSizes[i]));
    }
  }
  in_process::leave_all(workers);
}

}  // namespace
}  // namespace tributary::agent
