// WorkerConfig::collective_timeout with real Workers (loopback sockets, a real coordinator
// in this process): a collective that a peer holds up fails its attempt at the timeout,
// not at the adaptive deadline, and the recovery path re-runs it in a new view.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>
#include <thread>

#include "agent/worker.h"
#include "coordinator/coordinator.h"

namespace tributary::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "timeout-secret";

// Both members keep heartbeating, so a failure report cannot be confirmed: the coordinator
// answers it after `heartbeat_timeout` with a view of the same members.
coordinator::CoordinatorConfig coordinator_config(Duration heartbeat_timeout) {
  coordinator::CoordinatorConfig config;
  config.secret = kSecret;
  config.initial_world_size = 2;
  config.metrics_address = "";
  config.heartbeat_interval = milliseconds(50);
  config.heartbeat_timeout = heartbeat_timeout;
  config.straggler.enabled = false;
  return config;
}

// A collective held up by a peer fails its attempt after 300 ms; the adaptive deadline
// alone would wait a minute.
WorkerConfig worker_config(const coordinator::Coordinator& coord) {
  WorkerConfig wc;
  wc.coordinator = coord.endpoint();
  wc.secret = kSecret;
  wc.join_timeout = seconds(20);
  wc.recovery_timeout = seconds(20);
  wc.deadline_floor = seconds(60);
  wc.collective_timeout = milliseconds(300);
  return wc;
}

// Two Workers against `coord`, each in its own thread, each calling one all-reduce of
// rank + 1 and then leaving. Rank 1 first runs `hold_up` (given its Worker and rank 0's epoch
// when it joined, 0 until then) to choose when it calls; rank 0 calls at once, so its attempt
// is the one held up.
struct TwoRanks {
  membership::Epoch first_epoch = 0;  // rank 0's epoch when it joined
  std::vector<Result<Outcome>> outcomes{2, error(StatusCode::kInternal, "not run")};
  std::vector<float> results = std::vector<float>(2, 0.0f);
  std::vector<double> seconds_taken = std::vector<double>(2, 0.0);  // in all_reduce
  std::string log;  // what the Workers logged (stderr)
};

TwoRanks run_two_ranks(
    coordinator::Coordinator& coord,
    const std::function<void(Worker&, const std::atomic<membership::Epoch>&)>& hold_up) {
  TwoRanks out;
  testing::internal::CaptureStderr();
  std::atomic<membership::Epoch> first_epoch{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      auto started = Worker::start(worker_config(coord));
      if (!started) {
        ADD_FAILURE() << started.status().to_string();
        return;
      }
      Worker& w = **started;
      const int rank = w.rank();
      if (rank == 0) {
        first_epoch = w.epoch();
      } else {
        hold_up(w, first_epoch);
      }
      float value = static_cast<float>(rank + 1);
      const auto t0 = std::chrono::steady_clock::now();
      out.outcomes[rank] = w.all_reduce(&value, &value, 1, DType::kFloat32, ReduceOp::kSum);
      out.seconds_taken[rank] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.results[rank] = value;
      EXPECT_TRUE(w.leave().is_ok());
    });
  }
  for (auto& th : threads) th.join();
  out.log = testing::internal::GetCapturedStderr();
  out.first_epoch = first_epoch.load();
  return out;
}

TEST(CollectiveTimeout, AttemptHeldUpByAPeerTimesOutAndIsReRunInTheNextView) {
  coordinator::Coordinator coord(coordinator_config(milliseconds(600)),
                                 Logger("coordinator", [](const LogRecord&) {}));
  ASSERT_TRUE(coord.start().is_ok());

  // Rank 1 holds the collective up: it calls only once it has moved to a view after the
  // first (between calls, its idle recovery moves it), which rank 0's failure report is the
  // only thing to cause. Waiting for the coordinator's view alone is not enough: on a loaded
  // machine rank 1 could still call in the first view and complete it from what rank 0 sent
  // (AMemberThatReturnedEarly... below).
  const TwoRanks run = run_two_ranks(coord, [](Worker& w, const auto& first_epoch) {
    const Deadline limit = Deadline::after(seconds(20));
    while ((first_epoch.load() == 0 || w.epoch() <= first_epoch.load()) && !limit.passed()) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  coord.stop();
  const auto& [first_epoch, outcomes, results, seconds_taken, log] = run;

  ASSERT_TRUE(outcomes[0].is_ok()) << outcomes[0].status().to_string() << "\n" << log;
  ASSERT_TRUE(outcomes[1].is_ok()) << outcomes[1].status().to_string() << "\n" << log;
  EXPECT_EQ(outcomes[0]->attempts, 2) << "the first attempt timed out, the re-run committed";
  EXPECT_GT(outcomes[0]->epoch, first_epoch);
  EXPECT_EQ(outcomes[0]->epoch, outcomes[1]->epoch);
  EXPECT_EQ(outcomes[0]->contributors, 2);
  EXPECT_EQ(results[0], 3.0f);
  EXPECT_EQ(results[1], 3.0f);
  EXPECT_LT(seconds_taken[0], 20.0) << "waited for the adaptive deadline, not the timeout";
  EXPECT_NE(log.find("all_reduce seq 1 did not complete within the collective timeout of 300 ms"),
            std::string::npos)
      << log;
}

// The other ending of the same hold-up: rank 1 calls while rank 0's failure is still being
// resolved, completes the small all-reduce from what rank 0 sent before its attempt timed
// out, returns it without the agreement round, and leaves at once. Rank 0 lacks that
// result; the coordinator does not take rank 1's Leave until rank 1 has moved to the view
// that resolves the failure, where the repair hands rank 0 the result rank 1 returned
// (docs/fault-tolerance.md, "Leaving with a returned result"). Before, rank 1 left and
// rank 0 re-ran the all-reduce alone: two members of one epoch with different results.
// When rank 1's attempt fails too (its link may notice rank 0's close first), both re-run
// it in the next view; either way both must return the same bits and outcome.
TEST(CollectiveTimeout, AMemberThatReturnedEarlyHandsItsResultOverBeforeItLeaves) {
  std::atomic<bool> reported{false};
  // heartbeat_timeout: the window in which rank 1 calls and leaves.
  coordinator::Coordinator coord(coordinator_config(seconds(2)),
                                 Logger("coordinator", [&](const LogRecord& r) {
                                   if (r.message.find("reports a failure") != std::string::npos) {
                                     reported = true;
                                   }
                                 }));
  ASSERT_TRUE(coord.start().is_ok());

  // Rank 1 calls once rank 0 has reported its timed-out attempt.
  const TwoRanks run = run_two_ranks(coord, [&](Worker&, const auto&) {
    const Deadline limit = Deadline::after(seconds(20));
    while (!reported.load() && !limit.passed()) std::this_thread::sleep_for(milliseconds(2));
  });
  coord.stop();
  const auto& [first_epoch, outcomes, results, seconds_taken, log] = run;

  ASSERT_TRUE(outcomes[0].is_ok()) << outcomes[0].status().to_string() << "\n" << log;
  ASSERT_TRUE(outcomes[1].is_ok()) << outcomes[1].status().to_string() << "\n" << log;
  EXPECT_EQ(results[0], 3.0f) << log;
  EXPECT_EQ(results[1], 3.0f) << log;
  EXPECT_EQ(outcomes[0]->epoch, outcomes[1]->epoch) << log;
  EXPECT_EQ(outcomes[0]->contributors, 2);
  EXPECT_EQ(outcomes[1]->contributors, 2);
  if (outcomes[1]->epoch == first_epoch) {
    // The path this test is about: rank 1 returned in the first view, rank 0 was repaired.
    EXPECT_NE(log.find("did not let this member leave yet"), std::string::npos) << log;
  }
  std::printf("rank 1 returned in epoch %llu (the first view: %llu)\n",
              static_cast<unsigned long long>(outcomes[1]->epoch),
              static_cast<unsigned long long>(first_epoch));
}

}  // namespace
}  // namespace tributary::agent
