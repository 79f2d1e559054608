// The elastic loop (agent/elastic_loop.h) against a real coordinator in this process, on
// a fake clock: time passes for the coordinator only when a test says so, which is how a
// member gets evicted here (its heartbeats look a second late) without sleeping. Workers
// are real (sockets, client thread); the workload is counters.
#include "agent/elastic_loop.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "coordinator/coordinator.h"

namespace tributary::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "elastic-loop-secret";

// Polls `done` (bounded) while other threads make it true.
template <typename F>
bool eventually(F done, Duration limit = seconds(10)) {
  const Deadline deadline = Deadline::after(limit);
  while (!done()) {
    if (deadline.passed()) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

class ElasticLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator::CoordinatorConfig c;
    c.secret = kSecret;
    c.metrics_address.clear();
    c.initial_world_size = 1;
    c.heartbeat_interval = milliseconds(50);
    c.heartbeat_timeout = seconds(1);
    c.straggler.enabled = false;
    coordinator_ = std::make_unique<coordinator::Coordinator>(c, capture("coordinator"), clock_);
    ASSERT_TRUE(coordinator_->start().is_ok());
  }
  // The coordinator's thread logs into lines_ until it stops: stop it before the members
  // it writes to are destroyed (they are declared after it).
  void TearDown() override { coordinator_.reset(); }

  Logger capture(const std::string& who) {
    return Logger(who, [this, who](const LogRecord& r) {
      std::fprintf(stderr, "[%s] %s\n", who.c_str(), format_log_line(r, LogFormat::kText).c_str());
      std::lock_guard lock(mu_);
      lines_.push_back(who + ": " + std::string(r.message));
    });
  }
  bool logged(const std::string& needle) {
    std::lock_guard lock(mu_);
    for (const auto& l : lines_) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }

  // A workload of counters: `state` is registered after every join; `step` decides.
  ElasticWorkload workload(std::function<Result<StepResult>(Worker&)> step) {
    ElasticWorkload w;
    w.start_worker = [this]() -> Result<std::unique_ptr<Worker>> {
      ++starts_;
      WorkerConfig c;
      c.coordinator = coordinator_->endpoint();
      c.secret = kSecret;
      c.host = "test";
      c.join_timeout = milliseconds(10000);
      c.recovery_timeout = milliseconds(10000);
      return Worker::start(c);
    };
    w.register_state = [this](Worker& worker) {
      ++registrations_;
      worker.register_state("steps", std::as_writable_bytes(std::span(&steps_, 1)));
    };
    w.step = [step](Worker& worker, const BoundaryOutcome&) { return step(worker); };
    w.position = [this] { return steps_; };
    return w;
  }

  ElasticConfig fast() { return {.rejoin_delay = milliseconds(1), .retry_delay = milliseconds(1)}; }

  FakeClock clock_;
  std::unique_ptr<coordinator::Coordinator> coordinator_;
  std::mutex mu_;
  std::vector<std::string> lines_;
  int starts_ = 0;
  int registrations_ = 0;
  std::int64_t steps_ = 0;
};

TEST_F(ElasticLoopTest, FinishedWorkloadLeavesAndReportsItsWorld) {
  ElasticLoop loop(fast(), capture("loop"));
  auto report = loop.run(workload([&](Worker&) -> Result<StepResult> {
    return ++steps_ == 3 ? StepResult::kFinished : StepResult::kContinue;
  }));
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_FALSE(report->drained);
  EXPECT_EQ(report->joins, 1);
  EXPECT_EQ(report->evictions, 0);
  EXPECT_EQ(report->world_size, 1);
  EXPECT_EQ(report->rank, 0);
  EXPECT_GE(report->epoch, 1u);
  EXPECT_EQ(registrations_, 1);
  EXPECT_EQ(coordinator_->member_count(), 0u) << "left the cluster before returning";
}

TEST_F(ElasticLoopTest, DrainLeavesAtTheNextBoundary) {
  ElasticLoop loop(fast(), capture("loop"));
  auto report = loop.run(workload([&](Worker&) -> Result<StepResult> {
    return ++steps_ == 2 ? StepResult::kDrain : StepResult::kContinue;
  }));
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_TRUE(report->drained);
  EXPECT_TRUE(report->left);
  EXPECT_EQ(steps_, 2) << "no step after the one that asked to drain";
  EXPECT_TRUE(loop.drain_requested());
  EXPECT_TRUE(logged("loop: drained after step 2 and left the cluster"));
  EXPECT_EQ(coordinator_->member_count(), 0u);
}

TEST_F(ElasticLoopTest, EvictedMemberRejoinsAndRegistersItsStateAgain) {
  ElasticLoop loop(fast(), capture("loop"));
  bool evicted = false;
  auto report = loop.run(workload([&](Worker&) -> Result<StepResult> {
    if (++steps_ == 2 && !evicted) {
      evicted = true;
      // The coordinator's next tick finds this member silent for longer than its
      // heartbeat timeout and issues a view without it. (Unless a heartbeat was handled
      // between the jump and that tick, stamped with the new time: the client thread
      // keeps sending them in real time. Then the clock jumps again.)
      bool removed = false;
      for (int jump = 0; jump < 20 && !removed; ++jump) {
        clock_.advance(seconds(2));
        removed = eventually([&] { return coordinator_->member_count() == 0; }, milliseconds(500));
      }
      if (!removed) return error(StatusCode::kTimedOut, "the coordinator did not remove the member");
    }
    // A one-member world's boundaries need nobody, so steps go on until the eviction
    // notice reaches the Worker (milliseconds, longer on a loaded machine): finish only
    // once the loop has rejoined.
    if (steps_ > 1'000'000) return error(StatusCode::kTimedOut, "the eviction was never noticed");
    return steps_ >= 5 && starts_ >= 2 ? StepResult::kFinished : StepResult::kContinue;
  }));
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(report->evictions, 1);
  EXPECT_EQ(report->joins, 2);
  EXPECT_EQ(starts_, 2);
  EXPECT_EQ(registrations_, 2) << "the rejoined Worker registers the state again";
  EXPECT_FALSE(report->drained);
  EXPECT_TRUE(logged("coordinator: removed member 1 "));
  EXPECT_TRUE(logged("loop: evicted at step"));
  EXPECT_TRUE(logged("coordinator: member 2 joined"));
}

TEST_F(ElasticLoopTest, RefusedJoinsAreRetriedOnlyWhenTransientAndOnlyUntilRetryFor) {
  auto refused = [this](StatusCode code) {
    ElasticWorkload w =
        workload([](Worker&) -> Result<StepResult> { return StepResult::kFinished; });
    w.start_worker = [this, code]() -> Result<std::unique_ptr<Worker>> {
      ++starts_;
      return error(code, "refused");
    };
    return w;
  };
  ElasticConfig retry = fast();
  retry.retry_first_join = true;
  retry.retry_for = milliseconds(30);
  ElasticLoop transient(retry, capture("loop"));
  EXPECT_EQ(transient.run(refused(StatusCode::kUnavailable)).status().code(),
            StatusCode::kUnavailable);
  EXPECT_GT(starts_, 1);
  EXPECT_TRUE(logged("loop: join refused (unavailable: refused); retrying in 1 ms"));

  starts_ = 0;
  ElasticLoop wrong_secret(retry, capture("loop"));
  EXPECT_EQ(wrong_secret.run(refused(StatusCode::kAuthFailed)).status().code(),
            StatusCode::kAuthFailed);
  EXPECT_EQ(starts_, 1) << "a wrong secret is not going to change";

  starts_ = 0;
  ElasticLoop first_join_final(fast(), capture("loop"));
  EXPECT_EQ(first_join_final.run(refused(StatusCode::kUnavailable)).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(starts_, 1) << "retry_first_join is off: the cluster is not there";
}

TEST_F(ElasticLoopTest, DrainWhileJoiningEndsWithoutJoining) {
  ElasticConfig retry = fast();
  retry.retry_first_join = true;
  ElasticLoop loop(retry, capture("loop"));
  ElasticWorkload w = workload([](Worker&) -> Result<StepResult> { return StepResult::kFinished; });
  w.start_worker = [&]() -> Result<std::unique_ptr<Worker>> {
    ++starts_;
    loop.request_drain();  // SIGTERM while the coordinator keeps refusing
    return error(StatusCode::kUnavailable, "cool-down");
  };
  auto report = loop.run(w);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_TRUE(report->drained);
  EXPECT_FALSE(report->left);
  EXPECT_EQ(report->joins, 0);
  EXPECT_EQ(starts_, 1);
}

TEST_F(ElasticLoopTest, AStepErrorEndsTheLoopAndTheMemberLeaves) {
  ElasticLoop loop(fast(), capture("loop"));
  auto report = loop.run(workload([](Worker&) -> Result<StepResult> {
    return error(StatusCode::kMismatch, "ranks disagree");
  }));
  EXPECT_EQ(report.status().code(), StatusCode::kMismatch);
  EXPECT_EQ(coordinator_->member_count(), 0u) << "the dropped Worker left";
}

}  // namespace
}  // namespace tributary::agent
