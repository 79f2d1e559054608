// The Worker's recovery with ranks as threads: real Workers (loopback TCP links) over the
// in-process control plane (control_client/memory_control_plane.h), which runs the
// coordinator's real membership decisions on a fake clock. A member "freezes" when the
// test silences it and moves the clock past the heartbeat timeout; it is "killed" when its
// Worker goes away too and the others' reports are confirmed; the coordinator "restarts"
// when the test replaces its state as a journal replay does. No test waits a timeout out.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <span>
#include <thread>
#include <vector>

#include "agent/worker.h"
#include "algorithms/seq_space.h"
#include "control_client/memory_control_plane.h"
#include "core/hash.h"
#include "tests/agent/epoch_fabrics.h"
#include "tests/agent/in_process_world.h"
#include "tests/support/raw_socket.h"

namespace tributary::agent {
namespace {

using control_client::MemoryCoordinator;
using std::chrono::milliseconds;
using std::chrono::seconds;

using in_process::environment;
using in_process::eventually;
using in_process::kHeartbeatTimeout;
using in_process::leave_all;
using in_process::membership_config;
using in_process::worker_config;

// n Workers joined concurrently into the first view, indexed by rank.
std::vector<std::unique_ptr<Worker>> start_world(MemoryCoordinator& coordinator, int n,
                                                 std::size_t chunk_bytes = 256 * 1024) {
  return in_process::start_world(coordinator, n, {.chunk_bytes = chunk_bytes});
}

// Each rank's input of step `step`: distinct per rank and step, exact in float sums.
float input(int rank, int step) { return static_cast<float>((rank + 1) * 100 + step); }

struct StepResult {
  Result<Outcome> outcome = error(StatusCode::kInternal, "not run");
  std::vector<float> data;
};

// Runs an all-reduce of `count` floats on every rank in `ranks` (one thread each).
// `entered` counts the ranks that are about to call it.
std::vector<StepResult> all_reduce_on(std::vector<std::unique_ptr<Worker>>& workers,
                                      const std::vector<int>& ranks, int step, std::size_t count,
                                      std::atomic<int>* entered = nullptr) {
  std::vector<StepResult> results(workers.size());
  std::vector<std::thread> threads;
  for (int r : ranks) {
    threads.emplace_back([&, r] {
      StepResult& out = results[static_cast<std::size_t>(r)];
      out.data.assign(count, input(r, step));
      if (entered != nullptr) ++*entered;
      out.outcome = workers[static_cast<std::size_t>(r)]->all_reduce(
          out.data.data(), out.data.data(), count, DType::kFloat32, ReduceOp::kSum);
    });
  }
  for (auto& th : threads) th.join();
  return results;
}

// Runs step_boundary() on every Worker, one thread each.
std::vector<Result<BoundaryOutcome>> step_boundary_on(
    std::vector<std::unique_ptr<Worker>>& workers) {
  std::vector<Result<BoundaryOutcome>> out(workers.size(), error(StatusCode::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < workers.size(); ++r) {
    threads.emplace_back([&, r] { out[r] = workers[r]->step_boundary(); });
  }
  for (auto& th : threads) th.join();
  return out;
}

TEST(WorkerRecovery, AllMembersCommitTogetherInTheFirstView) {
  MemoryCoordinator coordinator(membership_config(3));
  auto workers = start_world(coordinator, 3);
  ASSERT_EQ(workers.size(), 3u);
  const auto results = all_reduce_on(workers, {0, 1, 2}, 1, 1000);
  for (int r = 0; r < 3; ++r) {
    const StepResult& s = results[static_cast<std::size_t>(r)];
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->epoch, 1u);
    EXPECT_EQ(s.outcome->contributors, 3);
    EXPECT_EQ(s.outcome->attempts, 1);
    for (float v : s.data) ASSERT_EQ(v, input(0, 1) + input(1, 1) + input(2, 1));
  }
  EXPECT_EQ(coordinator.views_issued(), 1);
  leave_all(workers);
}

// Members on two hosts (labels "a" and "b", two each): the Worker measures every pair,
// may run the ring in another order than the ranks' (algorithms/ring_order.h), and a ring
// all-reduce still leaves the same bits on every member, in this view and the next. With
// --no-measure-links nothing is measured and the result is the same sum.
TEST(WorkerRecovery, MembersOnSeveralHostsAgreeOnARingAllReduce) {
  for (bool measure : {true, false}) {
    SCOPED_TRACE(measure ? "measured" : "--no-measure-links");
    constexpr int kRanks = 4;
    constexpr std::size_t kCount = 300000;
    MemoryCoordinator coordinator(membership_config(kRanks));
    auto workers = in_process::start_world(
        coordinator, kRanks, {.configure = [&](int t, WorkerConfig& c) {
          c.host = t % 2 == 0 ? "a" : "b";
          c.algorithm = algorithms::AllReduceAlgorithm::kRing;
          c.measure_links = measure;
        }});
    ASSERT_EQ(workers.size(), static_cast<std::size_t>(kRanks));
    std::vector<std::vector<float>> in(kRanks), out(kRanks);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-1e3f, 1e3f);
    for (auto& v : in) {
      for (std::size_t i = 0; i < kCount; ++i) v.push_back(u(rng) * (i % 5 == 0 ? 1e-5f : 1.0f));
    }
    std::vector<Result<Outcome>> outcomes(kRanks, error(StatusCode::kInternal, "not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        const auto i = static_cast<std::size_t>(r);
        out[i].resize(kCount);
        outcomes[i] = workers[i]->all_reduce(in[i].data(), out[i].data(), kCount,
                                             DType::kFloat32, ReduceOp::kSum);
      });
    }
    for (auto& th : threads) th.join();
    for (int r = 0; r < kRanks; ++r) {
      const auto i = static_cast<std::size_t>(r);
      ASSERT_TRUE(outcomes[i].is_ok()) << outcomes[i].status().to_string();
      EXPECT_EQ(std::memcmp(out[i].data(), out[0].data(), kCount * sizeof(float)), 0)
          << "rank " << r;
    }
    for (std::size_t k = 0; k < kCount; k += 4999) {
      double sum = 0;
      for (const auto& v : in) sum += v[k];
      EXPECT_NEAR(out[0][k], sum, 1e-2) << k;
    }
    leave_all(workers);
  }
}

enum class Failure {
  // The victim stops heartbeating and never calls again (SIGSTOP, a frozen VM): the
  // coordinator removes it once the clock passes the heartbeat timeout.
  kFreeze,
  // The victim's process dies: its links go down (its Worker is destroyed: the others see
  // it at once, not at a deadline), it says nothing more, and the others' failure reports
  // are confirmed by its silence after confirm_silence, well before the heartbeat timeout.
  kKill,
};

// n members run `steps_before` all-reduces of `count` floats together, then the victim
// fails (`how`) while the others are in the next one. Their links of the old view are
// aborted and they re-run the collective in the new view with their original inputs:
// same bits on every survivor, the victim's input out.
void failure_scenario(Failure how, int n, int victim, int steps_before, std::size_t count,
                      std::size_t chunk_bytes) {
  SCOPED_TRACE(std::string(how == Failure::kFreeze ? "freeze" : "kill") +
               " n=" + std::to_string(n) + " victim rank " + std::to_string(victim) + " after " +
               std::to_string(steps_before) + " steps, " + std::to_string(count) + " floats");
  const Duration confirm = membership::MembershipConfig{}.confirm_silence;
  ASSERT_LT(confirm, kHeartbeatTimeout) << "a kill's removal must come from the reports";
  MemoryCoordinator coordinator(membership_config(n));
  auto workers = start_world(coordinator, n, chunk_bytes);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(n));
  std::vector<int> everyone(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) everyone[static_cast<std::size_t>(r)] = r;
  for (int step = 1; step <= steps_before; ++step) {
    for (const StepResult& s : all_reduce_on(workers, everyone, step, count)) {
      ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    }
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r) {
    if (r != victim) survivors.push_back(r);
  }
  const std::uint64_t victim_id = workers[static_cast<std::size_t>(victim)]->member_id();
  const int step = steps_before + 1;
  std::atomic<int> entered{0};
  std::vector<StepResult> results;
  std::thread run([&] { results = all_reduce_on(workers, survivors, step, count, &entered); });
  ASSERT_TRUE(eventually([&] { return entered.load() == n - 1; }));
  coordinator.silence(victim_id);
  if (how == Failure::kFreeze) {
    coordinator.advance(kHeartbeatTimeout + milliseconds(1));
  } else {
    workers[static_cast<std::size_t>(victim)].reset();
    ASSERT_TRUE(eventually([&] { return coordinator.failure_reports() > 0; }));
    coordinator.advance(confirm + milliseconds(1));
  }
  run.join();

  const membership::View after = coordinator.view();
  EXPECT_EQ(after.size(), static_cast<std::size_t>(n - 1));
  EXPECT_EQ(after.find(victim_id), nullptr);
  float expected = 0;
  for (int r : survivors) expected += input(r, step);
  const std::vector<float>& first = results[static_cast<std::size_t>(survivors[0])].data;
  for (int r : survivors) {
    const StepResult& s = results[static_cast<std::size_t>(r)];
    ASSERT_TRUE(s.outcome.is_ok()) << "rank " << r << ": " << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->epoch, after.epoch) << "rank " << r;
    EXPECT_EQ(s.outcome->contributors, n - 1) << "rank " << r;
    EXPECT_LE(s.outcome->attempts, 2) << "rank " << r;
    for (float v : s.data) ASSERT_EQ(v, expected) << "rank " << r;
    ASSERT_EQ(std::memcmp(s.data.data(), first.data(), s.data.size() * sizeof(float)), 0);
  }
  if (how == Failure::kFreeze) {
    // The frozen member learns it was removed: its next collective says so.
    float x = 1;
    auto late = workers[static_cast<std::size_t>(victim)]->all_reduce(&x, &x, 1, DType::kFloat32,
                                                                      ReduceOp::kSum);
    ASSERT_FALSE(late.is_ok());
    EXPECT_EQ(late.status().code(), StatusCode::kEvicted) << late.status().to_string();
  }
  leave_all(workers);
}

// Every world size 2..5, every rank as the victim, both kinds of failure.
TEST(WorkerRecovery, FailedMemberIsRemovedAndTheOthersReRunWithoutIt) {
  for (Failure how : {Failure::kFreeze, Failure::kKill}) {
    for (int n = 2; n <= 5; ++n) {
      for (int victim = 0; victim < n; ++victim) {
        failure_scenario(how, n, victim, 1, 4096, 256 * 1024);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// Seeded: the kind of failure, world size, victim, how many steps went well before, and
// the size (one float, an odd count, many 16 KiB chunks).
TEST(WorkerRecovery, FailuresAtRandomPointsOfRandomWorlds) {
  const std::size_t counts[] = {1, 777, 50000};
  for (std::uint32_t seed = 1; seed <= 16; ++seed) {
    std::mt19937 rng(seed);
    const Failure how =
        std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? Failure::kFreeze : Failure::kKill;
    const int n = std::uniform_int_distribution<int>(2, 6)(rng);
    const int victim = std::uniform_int_distribution<int>(0, n - 1)(rng);
    const int steps_before = std::uniform_int_distribution<int>(0, 3)(rng);
    const std::size_t count = counts[std::uniform_int_distribution<int>(0, 2)(rng)];
    SCOPED_TRACE("seed " + std::to_string(seed));
    failure_scenario(how, n, victim, steps_before, count, 16 * 1024);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A drain: the leaving member and the others meet at a step boundary, the coordinator
// issues one view without it, the leaver is told it left, and nobody sees a failure.
TEST(WorkerRecovery, DrainedMemberLeavesAtTheBoundaryWithoutAFailure) {
  constexpr int kN = 3;
  MemoryCoordinator coordinator(membership_config(kN));
  auto workers = start_world(coordinator, kN);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  workers[1]->drain();
  const std::vector<Result<BoundaryOutcome>> boundaries = step_boundary_on(workers);
  ASSERT_TRUE(boundaries[1].is_ok()) << boundaries[1].status().to_string();
  EXPECT_TRUE(boundaries[1]->left);
  for (int r : {0, 2}) {
    const auto& b = boundaries[static_cast<std::size_t>(r)];
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    EXPECT_FALSE(b->left);
    EXPECT_TRUE(b->view_changed);
    EXPECT_EQ(b->world_size, kN - 1);
  }
  EXPECT_EQ(coordinator.views_issued(), 2) << "one view for the boundary, none for a failure";
  // The two that stayed hold ranks 0 and 1 of the new view now.
  std::vector<std::unique_ptr<Worker>> stayed(2);
  stayed[static_cast<std::size_t>(workers[0]->rank())] = std::move(workers[0]);
  stayed[static_cast<std::size_t>(workers[2]->rank())] = std::move(workers[2]);
  for (const StepResult& s : all_reduce_on(stayed, {0, 1}, 3, 10)) {
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->contributors, 2);
    EXPECT_EQ(s.outcome->attempts, 1) << "no failure to recover from";
    EXPECT_EQ(s.data[0], input(0, 3) + input(1, 3));
  }
}

// A join: the newcomer waits (pending) until the members reach a step boundary, is admitted
// by one view, receives the registered state from a member (SHA-256 verified), and then
// contributes.
TEST(WorkerRecovery, JoinerIsAdmittedAtABoundaryAndReceivesTheState) {
  constexpr int kN = 2;
  MemoryCoordinator coordinator(membership_config(kN));
  auto workers = start_world(coordinator, kN);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  std::vector<std::vector<float>> params(kN + 1, std::vector<float>(1000, 0.0f));
  for (int r = 0; r < kN; ++r) {
    for (std::size_t i = 0; i < params[r].size(); ++i) params[r][i] = 0.5f * static_cast<float>(i);
    workers[static_cast<std::size_t>(r)]->register_state(
        "params", std::as_writable_bytes(std::span(params[static_cast<std::size_t>(r)])));
  }
  std::unique_ptr<Worker> joiner;
  Result<BoundaryOutcome> joined_boundary = error(StatusCode::kInternal, "not run");
  std::thread newcomer([&] {
    auto w = Worker::start(worker_config(), environment(coordinator));
    if (!w) {
      joined_boundary = w.status();
      return;
    }
    joiner = std::move(*w);
    joiner->register_state("params", std::as_writable_bytes(std::span(params[kN])));
    joined_boundary = joiner->step_boundary();
  });
  ASSERT_TRUE(eventually([&] { return coordinator.member_count() == kN + 1; }));
  EXPECT_EQ(coordinator.views_issued(), 1) << "a joiner waits for a step boundary";
  const std::vector<Result<BoundaryOutcome>> boundaries = step_boundary_on(workers);
  newcomer.join();
  ASSERT_TRUE(joined_boundary.is_ok()) << joined_boundary.status().to_string();
  EXPECT_TRUE(joined_boundary->received_state);
  EXPECT_EQ(joined_boundary->world_size, kN + 1);
  // What came, from whom, under which hash: the name and the bytes of every buffer.
  EXPECT_EQ(joined_boundary->state_bytes, params[0].size() * sizeof(float));
  EXPECT_EQ(joined_boundary->state_source_rank, 0) << "the lowest rank that holds it";
  EXPECT_EQ(joined_boundary->state_sha256,
            to_hex(Sha256().update("params").update(std::as_bytes(std::span(params[0]))).finish()));
  for (const auto& b : boundaries) {
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    EXPECT_TRUE(b->view_changed);
    EXPECT_FALSE(b->received_state);
    EXPECT_EQ(b->state_bytes, 0u);
    EXPECT_TRUE(b->state_sha256.empty());
  }
  EXPECT_EQ(params[kN], params[0]) << "the joiner holds the members' state";
  EXPECT_EQ(coordinator.views_issued(), 2) << "one view admitted the joiner";
  workers.push_back(std::move(joiner));
  std::vector<std::unique_ptr<Worker>> by_rank(kN + 1);
  for (auto& w : workers) by_rank.at(static_cast<std::size_t>(w->rank())) = std::move(w);
  for (const StepResult& s : all_reduce_on(by_rank, {0, 1, 2}, 5, 3)) {
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->contributors, kN + 1);
    EXPECT_EQ(s.data[0], input(0, 5) + input(1, 5) + input(2, 5));
  }
  leave_all(by_rank);
}

// rank(), size() and epoch() never wait for a move to a new view between calls (the idle
// recovery holds the call lock for the whole move): here one member's move is held inside
// its link set-up until the accessors, asked from another thread, have answered.
TEST(WorkerRecovery, AccessorsAnswerWhileAMoveBetweenCallsRuns) {
  constexpr int kN = 3;
  MemoryCoordinator coordinator(membership_config(kN));
  in_process::EpochFabrics fabrics;
  std::atomic<bool> hold{true};
  std::atomic<bool> held{false};
  std::vector<int> thread_of_rank;
  auto by_rank = in_process::start_world(
      coordinator, kN,
      {.clock_of_rank = &thread_of_rank,
       .connect_links = [&, borrowed = in_process::fabric_links(fabrics)](
                            int t, std::uint64_t epoch, int rank, int size) {
         if (t == 0 && epoch > 1) {
           held = true;
           // Bounded: a broken accessor fails the test below, then lets this go.
           const Deadline limit = Deadline::after(seconds(30));
           while (hold.load() && !limit.passed()) std::this_thread::sleep_for(milliseconds(1));
         }
         return borrowed(t, epoch, rank, size);
       }});
  ASSERT_EQ(by_rank.size(), static_cast<std::size_t>(kN));
  // By start thread: thread 0's Worker is the one whose move is held.
  std::vector<std::unique_ptr<Worker>> started(kN);
  for (int r = 0; r < kN; ++r) {
    started.at(static_cast<std::size_t>(thread_of_rank[static_cast<std::size_t>(r)])) =
        std::move(by_rank[static_cast<std::size_t>(r)]);
  }
  Worker& mover = *started[0];
  ASSERT_EQ(mover.epoch(), 1u);
  ASSERT_EQ(mover.size(), kN);

  // Member 2 freezes between calls: the others are between calls too, so only their idle
  // recovery moves them to the view without it.
  coordinator.silence(started[2]->member_id());
  coordinator.advance(kHeartbeatTimeout + milliseconds(1));
  ASSERT_TRUE(eventually([&] { return held.load(); })) << "member 0 never started the move";

  auto asked = std::async(std::launch::async, [&] {
    return std::array<std::uint64_t, 3>{static_cast<std::uint64_t>(mover.rank()),
                                        static_cast<std::uint64_t>(mover.size()), mover.epoch()};
  });
  const bool answered = asked.wait_for(seconds(5)) == std::future_status::ready;
  hold = false;
  ASSERT_TRUE(answered) << "rank()/size()/epoch() waited for the move between calls";
  const auto seen = asked.get();
  // Published as the move adopted the view, before its links came up.
  EXPECT_EQ(seen[1], static_cast<std::uint64_t>(kN - 1));
  EXPECT_EQ(seen[2], coordinator.view().epoch);
  EXPECT_EQ(seen[0], coordinator.view().find(mover.member_id())->rank);

  // The move finishes and the two members go on in the new view.
  std::vector<std::unique_ptr<Worker>> moved(kN - 1);
  moved.at(static_cast<std::size_t>(seen[0])) = std::move(started[0]);
  moved.at(static_cast<std::size_t>(started[1]->rank())) = std::move(started[1]);
  for (const StepResult& s : all_reduce_on(moved, {0, 1}, 1, 1000)) {
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->contributors, kN - 1);
  }
  moved.push_back(std::move(started[2]));
  leave_all(moved);
}

// A training loop's last all-reduce, then each rank leaves: the rank that finishes first
// leaves while the other still waits for its (delayed) message. The view that lets it go
// only removes a leaver (membership::View::leaves_only), so the other's all-reduce is not
// aborted for it: it completes with the leaver's input, the result the leaver returned.
// Before, the other re-ran the all-reduce alone in the leave's view and returned its own
// input: two members of one epoch with different results of one collective.
TEST(WorkerRecovery, AViewThatOnlyLetsALeaverGoLetsTheOthersFinishItsLastAllReduce) {
  MemoryCoordinator coordinator(membership_config(2));
  std::atomic<int> fabrics_made{0};
  in_process::EpochFabrics fabrics([&](algorithms::MemoryFabric& f) {
    // Rank 0's messages of the first view reach rank 1 late; rank 0 gets rank 1's at once.
    if (fabrics_made.fetch_add(1) == 0) f.set_delay(0, milliseconds(400));
  });
  auto by_rank = in_process::start_world(coordinator, 2,
                                         {.connect_links = in_process::fabric_links(fabrics)});
  ASSERT_EQ(by_rank.size(), 2u);
  std::array<float, 2> values{1.0f, 2.0f};
  std::array<Result<Outcome>, 2> outcomes{error(StatusCode::kInternal, "not run"),
                                          error(StatusCode::kInternal, "not run")};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Worker& w = *by_rank[static_cast<std::size_t>(r)];
      float& v = values[static_cast<std::size_t>(r)];
      outcomes[static_cast<std::size_t>(r)] =
          w.all_reduce(&v, &v, 1, DType::kFloat32, ReduceOp::kSum);
      if (r == 0) {
        EXPECT_TRUE(w.leave().is_ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < 2; ++r) {
    const auto& o = outcomes[static_cast<std::size_t>(r)];
    ASSERT_TRUE(o.is_ok()) << "rank " << r << ": " << o.status().to_string();
    EXPECT_EQ(values[static_cast<std::size_t>(r)], 3.0f) << "rank " << r;
    EXPECT_EQ(o->epoch, 1u) << "rank " << r;
    EXPECT_EQ(o->contributors, 2) << "rank " << r;
  }
  EXPECT_GE(coordinator.view().epoch, 2u) << "rank 0 left while rank 1 was still inside";
  leave_all(by_rank);
}

// Two leavers, one after the other: rank 2 gets ranks 0's and 1's messages of the first
// view late, so both return the all-reduce (everyone sends to everyone; no commit round
// and no private copy, which would hold a leaver back until the others moved) and leave
// while it is still inside. Views 2 and 3 each only let a leaver go: rank 2 finishes on
// the first view's link with every input, as they did, instead of re-running it alone.
TEST(WorkerRecovery, ARunOfViewsThatOnlyLetLeaversGoLetsTheOthersFinish) {
  MemoryCoordinator coordinator(membership_config(3));
  std::atomic<int> fabrics_made{0};
  in_process::EpochFabrics fabrics([&](algorithms::MemoryFabric& f) {
    if (fabrics_made.fetch_add(1) == 0) {
      f.set_delay(0, 2, milliseconds(600));
      f.set_delay(1, 2, milliseconds(600));
    }
  });
  auto by_rank = in_process::start_world(
      coordinator, 3,
      {.configure =
           [](int, WorkerConfig& c) {
             c.algorithm = algorithms::AllReduceAlgorithm::kDirect;
             c.agreement = false;
             c.speculative_max_bytes = 0;
           },
       .connect_links = in_process::fabric_links(fabrics)});
  ASSERT_EQ(by_rank.size(), 3u);
  std::array<float, 3> values{1.0f, 2.0f, 3.0f};
  std::array<Result<Outcome>, 3> outcomes{error(StatusCode::kInternal, "not run"),
                                          error(StatusCode::kInternal, "not run"),
                                          error(StatusCode::kInternal, "not run")};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      Worker& w = *by_rank[static_cast<std::size_t>(r)];
      float& v = values[static_cast<std::size_t>(r)];
      outcomes[static_cast<std::size_t>(r)] =
          w.all_reduce(&v, &v, 1, DType::kFloat32, ReduceOp::kSum);
      if (r == 1) {  // after rank 0: one leave view, then the other
        EXPECT_TRUE(eventually([&] { return coordinator.view().epoch >= 2; }));
      }
      if (r < 2) {
        EXPECT_TRUE(w.leave().is_ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < 3; ++r) {
    const auto& o = outcomes[static_cast<std::size_t>(r)];
    ASSERT_TRUE(o.is_ok()) << "rank " << r << ": " << o.status().to_string();
    EXPECT_EQ(values[static_cast<std::size_t>(r)], 6.0f) << "rank " << r;
    EXPECT_EQ(o->epoch, 1u) << "rank " << r;
    EXPECT_EQ(o->contributors, 3) << "rank " << r;
  }
  EXPECT_GE(coordinator.view().epoch, 3u) << "ranks 0 and 1 left while rank 2 was inside";
  leave_all(by_rank);
}

// Sends in a seq space, per view, over every member's links.
class SpaceCounter {
 public:
  void count(std::uint64_t epoch, std::uint64_t seq) {
    std::lock_guard lock(mu_);
    ++sends_[{epoch, static_cast<unsigned>(seq >> algorithms::kSeqSpaceShift)}];
  }
  int sends(std::uint64_t epoch, algorithms::SeqSpace space) const {
    std::lock_guard lock(mu_);
    auto it = sends_.find({epoch, static_cast<unsigned>(space)});
    return it == sends_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::uint64_t, unsigned>, int> sends_;
};

class CountingLink : public testing::ForwardingLink {
 public:
  CountingLink(algorithms::Link& inner, std::uint64_t epoch, SpaceCounter& counter)
      : ForwardingLink(inner), epoch_(epoch), counter_(counter) {}
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    counter_.count(epoch_, tag.seq);
    return inner_.send(peer, tag, data);
  }

 private:
  std::uint64_t epoch_;
  SpaceCounter& counter_;
};

// Five members on two host labels: the first view measures every pair to order the ring.
// One freezes; the view without it has only lost a member, so its members agree to reuse
// the first view's matrix (one small all-reduce) instead of measuring n - 1 rounds again,
// and a ring all-reduce in the ordered ring still gives every member the same exact sum.
TEST(WorkerRecovery, AViewThatOnlyLostAMemberReusesThePairMeasurement) {
  constexpr int kN = 5;
  constexpr std::size_t kCount = 100000;
  MemoryCoordinator coordinator(membership_config(kN));
  in_process::EpochFabrics fabrics;
  SpaceCounter counter;
  auto workers = in_process::start_world(
      coordinator, kN,
      {.configure =
           [](int t, WorkerConfig& c) {
             c.host = t % 2 == 0 ? "a" : "b";
             c.algorithm = algorithms::AllReduceAlgorithm::kRing;
           },
       .connect_links = [&](int, std::uint64_t epoch, int rank,
                            int size) -> Result<std::unique_ptr<algorithms::Link>> {
         return std::unique_ptr<algorithms::Link>(
             std::make_unique<CountingLink>(fabrics.at(epoch, size).link(rank), epoch, counter));
       }});
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  using algorithms::SeqSpace;
  EXPECT_GT(counter.sends(1, SeqSpace::kPairProbe), 0) << "the first view measures its pairs";
  EXPECT_GT(counter.sends(1, SeqSpace::kPairReuse), 0) << "after agreeing it has nothing to reuse";

  coordinator.silence(workers[kN - 1]->member_id());
  coordinator.advance(kHeartbeatTimeout + milliseconds(1));
  const std::uint64_t second = coordinator.view().epoch;
  ASSERT_GT(second, 1u);
  ASSERT_TRUE(eventually([&] {
    for (int r = 0; r < kN - 1; ++r) {
      if (workers[static_cast<std::size_t>(r)]->epoch() != second) return false;
    }
    return true;
  }));
  std::vector<std::unique_ptr<Worker>> survivors(kN - 1);
  for (int r = 0; r < kN - 1; ++r) {
    auto& w = workers[static_cast<std::size_t>(r)];
    survivors.at(static_cast<std::size_t>(w->rank())) = std::move(w);
  }
  for (const StepResult& s : all_reduce_on(survivors, {0, 1, 2, 3}, 1, kCount)) {
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->epoch, second);
    EXPECT_EQ(s.outcome->algorithm, algorithms::AllReduceAlgorithm::kRing);
    for (float v : s.data) ASSERT_EQ(v, input(0, 1) + input(1, 1) + input(2, 1) + input(3, 1));
  }
  EXPECT_EQ(counter.sends(second, SeqSpace::kPairProbe), 0)
      << "the view without the frozen member measured its pairs again";
  EXPECT_GT(counter.sends(second, SeqSpace::kPairReuse), 0);
  survivors.push_back(std::move(workers[kN - 1]));
  leave_all(survivors);
}

// The value of one series in a /metrics text (nullopt: absent).
std::optional<double> series_value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

std::string scrape_metrics(int port) {
  testing::RawSocket s(port);
  if (!s.connected() || !s.send_all("GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")) return {};
  return s.read_all();
}

// On rank 1's link of the first view, once `cut` is set, the receives from rank 2 wait for a
// message that never comes (rank 2's own frame arrives and is never matched): rank 1 cannot
// finish the all-reduce that ranks 0 and 2 finish and return early.
class NoReceiptFromRank2 : public testing::ForwardingLink {
 public:
  NoReceiptFromRank2(algorithms::Link& inner, const std::atomic<bool>& cut)
      : ForwardingLink(inner), cut_(cut) {}
  Handle recv(int peer, algorithms::Tag tag, std::span<std::byte> data) override {
    if (cut_.load() && rank() == 1 && peer == 2) tag.seq = ~std::uint64_t{0};
    return inner_.recv(peer, tag, data);
  }

 private:
  const std::atomic<bool>& cut_;
};

// A small all-reduce returns early on ranks 0 and 2 (no commit round); rank 1 never gets
// rank 2's part, and rank 2 freezes. In the view without rank 2, the repair step gives rank 1
// rank 0's copy: its call returns the same bits, from the first view with 3 contributors,
// and its tributary_result_repairs_total{outcome="received"} counts it (rank 0's does not).
TEST(WorkerRecovery, ALaggardReceivesTheResultAndTheRepairIsCounted) {
  constexpr int kN = 3;
  constexpr std::size_t kCount = 1024;  // 4 KiB: below speculative_max_bytes
  MemoryCoordinator coordinator(membership_config(kN));
  in_process::EpochFabrics fabrics;
  std::atomic<bool> cut{false};
  auto workers = in_process::start_world(
      coordinator, kN,
      {.configure =
           [](int, WorkerConfig& c) {
             c.algorithm = algorithms::AllReduceAlgorithm::kDirect;
             c.measure_links = false;
             c.metrics_bind = "127.0.0.1:0";
           },
       .connect_links = [&, borrowed = in_process::fabric_links(fabrics)](
                            int t, std::uint64_t epoch, int rank,
                            int size) -> Result<std::unique_ptr<algorithms::Link>> {
         if (epoch > 1) return borrowed(t, epoch, rank, size);
         return std::unique_ptr<algorithms::Link>(
             std::make_unique<NoReceiptFromRank2>(fabrics.at(epoch, size).link(rank), cut));
       }});
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  for (const auto& w : workers) ASSERT_EQ(w->epoch(), 1u);
  const std::uint64_t frozen_id = workers[2]->member_id();

  cut = true;
  std::vector<StepResult> early;
  std::atomic<int> entered{0};
  std::thread laggard([&] { early = all_reduce_on(workers, {1}, 1, kCount, &entered); });
  ASSERT_TRUE(eventually([&] { return entered.load() == 1; }));
  auto returning = std::async(std::launch::async,
                              [&] { return all_reduce_on(workers, {0, 2}, 1, kCount); });
  if (returning.wait_for(seconds(20)) != std::future_status::ready) {
    // They waited for rank 1 (a commit round): free them before failing.
    coordinator.silence(frozen_id);
    coordinator.advance(kHeartbeatTimeout + milliseconds(1));
    returning.wait();
    laggard.join();
    leave_all(workers);
    FAIL() << "ranks 0 and 2 did not return the small all-reduce without rank 1";
  }
  const std::vector<StepResult> returned = returning.get();
  for (int r : {0, 2}) {
    const StepResult& s = returned[static_cast<std::size_t>(r)];
    ASSERT_TRUE(s.outcome.is_ok()) << "rank " << r << ": " << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->epoch, 1u);
  }
  coordinator.silence(frozen_id);
  coordinator.advance(kHeartbeatTimeout + milliseconds(1));
  laggard.join();

  const StepResult& got = early[1];
  const StepResult& ref = returned[0];
  ASSERT_TRUE(got.outcome.is_ok()) << got.outcome.status().to_string();
  EXPECT_EQ(got.outcome->epoch, 1u) << "the result of the first view, not a re-run";
  EXPECT_EQ(got.outcome->contributors, kN);
  EXPECT_EQ(got.outcome->contributor_ids, ref.outcome->contributor_ids);
  ASSERT_EQ(got.data.size(), ref.data.size());
  EXPECT_EQ(std::memcmp(got.data.data(), ref.data.data(), kCount * sizeof(float)), 0);
  EXPECT_EQ(got.data[0], input(0, 1) + input(1, 1) + input(2, 1));
  EXPECT_EQ(coordinator.view().find(frozen_id), nullptr);

  const std::string series = "tributary_result_repairs_total{outcome=\"received\"}";
  const std::string laggard_text = scrape_metrics(workers[1]->metrics_port());
  EXPECT_EQ(series_value(laggard_text, series), 1.0) << laggard_text;
  EXPECT_EQ(series_value(laggard_text, "tributary_result_repairs_total{outcome=\"re-run\"}"),
            0.0);
  EXPECT_EQ(series_value(scrape_metrics(workers[0]->metrics_port()), series).value_or(0), 0.0)
      << "rank 0 held the result: nothing to repair";

  // The two go on together in the view without rank 2.
  std::vector<std::unique_ptr<Worker>> by_rank(kN - 1);
  for (int r : {0, 1}) {
    const int now = workers[static_cast<std::size_t>(r)]->rank();
    by_rank.at(static_cast<std::size_t>(now)) = std::move(workers[static_cast<std::size_t>(r)]);
  }
  for (const StepResult& s : all_reduce_on(by_rank, {0, 1}, 2, kCount)) {
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_EQ(s.outcome->contributors, kN - 1);
  }
  by_rank.push_back(std::move(workers[2]));
  leave_all(by_rank);
}

// The coordinator restarts (kill -9, back with its journal), once between steps and once
// while a member is frozen mid-step: the members resume with their ids, epochs continue
// above the journaled one, the frozen member does not resume and is removed at the resume
// deadline, and the others' step commits without it.
TEST(WorkerRecovery, CoordinatorRestartsBetweenStepsAndDuringAFreeze) {
  constexpr int kN = 3;
  MemoryCoordinator coordinator(membership_config(kN));
  auto workers = start_world(coordinator, kN);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  std::vector<std::uint64_t> ids;
  for (const auto& w : workers) ids.push_back(w->member_id());
  const membership::Epoch first = coordinator.view().epoch;
  coordinator.restart();
  // A small all-reduce returns without the commit round: a member may complete it in the
  // journaled view before the restart's view aborts the others, who then get its result
  // (the repair step). Either way every member reports the same epoch.
  const auto after_restart = all_reduce_on(workers, {0, 1, 2}, 1, 100);
  for (const StepResult& s : after_restart) {
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_GE(s.outcome->epoch, first);
    EXPECT_EQ(s.outcome->epoch, after_restart[0].outcome->epoch);
    EXPECT_EQ(s.data, after_restart[0].data);
    EXPECT_EQ(s.outcome->contributors, kN);
    EXPECT_EQ(s.outcome->contributor_ids, ids) << "resumed members keep their ids";
  }
  const membership::Epoch resumed = coordinator.view().epoch;
  std::atomic<int> entered{0};
  std::vector<StepResult> results;
  std::thread run([&] { results = all_reduce_on(workers, {0, 2}, 2, 100, &entered); });
  ASSERT_TRUE(eventually([&] { return entered.load() == 2; }));
  coordinator.silence(ids[1]);
  coordinator.restart();
  coordinator.advance(membership::MembershipConfig{}.resume_timeout + milliseconds(1));
  run.join();
  for (int r : {0, 2}) {
    const StepResult& s = results[static_cast<std::size_t>(r)];
    ASSERT_TRUE(s.outcome.is_ok()) << s.outcome.status().to_string();
    EXPECT_GT(s.outcome->epoch, resumed);
    EXPECT_EQ(s.outcome->contributors, 2);
    EXPECT_EQ(s.data[0], input(0, 2) + input(2, 2));
  }
  EXPECT_EQ(std::memcmp(results[0].data.data(), results[2].data.data(), 100 * sizeof(float)), 0);
  leave_all(workers);
}

// A training loop on every member, each member's step timing on a clock of its own:
// `steps` x (step boundary, all-reduce, then `compute(member, step)` passes on its clock).
// Ends[t] is how member t's loop ended; contributors[t] of its last all-reduce.
struct TimedRun {
  std::vector<Status> ends;
  std::vector<int> contributors;
  std::vector<std::uint64_t> ids;
  membership::View last_view;  // when the loops ended, before the members left
  bool still_member(int t) const {
    return last_view.find(ids[static_cast<std::size_t>(t)]) != nullptr;
  }
};
TimedRun run_timed_steps(MemoryCoordinator& coordinator, int n, int steps,
                         const std::function<Duration(int, int)>& compute) {
  std::vector<FakeClock> clocks(static_cast<std::size_t>(n));
  std::vector<std::unique_ptr<Worker>> workers(static_cast<std::size_t>(n));
  TimedRun out{std::vector<Status>(static_cast<std::size_t>(n)),
               std::vector<int>(static_cast<std::size_t>(n), 0),
               std::vector<std::uint64_t>(static_cast<std::size_t>(n), 0),
               {}};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < workers.size(); ++t) {
    threads.emplace_back([&, t] {
      auto w = Worker::start(worker_config(), environment(coordinator, &clocks[t]));
      if (!w) return void(out.ends[t] = w.status());
      workers[t] = std::move(*w);
      out.ids[t] = workers[t]->member_id();
    });
  }
  for (auto& th : threads) th.join();
  threads.clear();
  for (std::size_t t = 0; t < workers.size(); ++t) {
    threads.emplace_back([&, t] {
      if (!workers[t]) return;
      for (int step = 1; step <= steps; ++step) {
        auto b = workers[t]->step_boundary();
        if (!b) return void(out.ends[t] = b.status());
        float x = 1;
        auto o = workers[t]->all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum);
        if (!o) return void(out.ends[t] = o.status());
        out.contributors[t] = o->contributors;
        clocks[t].advance(compute(static_cast<int>(t), step));
      }
    });
  }
  for (auto& th : threads) th.join();
  out.last_view = coordinator.view();
  leave_all(workers);
  return out;
}

membership::MembershipConfig with_straggler_policy(int n) {
  membership::MembershipConfig config = membership_config(n);
  config.straggler = membership::StragglerConfig{};  // enabled, k = 2, 3 of the last 5
  return config;
}

// The epoch machine's deadlines pass on the Worker's clock (WorkerEnvironment::clock), not
// by waiting them out: a member whose first view never comes (the initial world lacks a
// member) fails its start at the join deadline of its own clock, a minute that the test
// passes in an instant, within a view nudge of real time.
TEST(WorkerRecovery, TheMovesDeadlinePassesOnTheWorkersClock) {
  MemoryCoordinator coordinator(membership_config(2));  // the second member never comes
  FakeClock clock;
  WorkerConfig config = in_process::worker_config();
  config.join_timeout = seconds(60);
  auto started = std::async(std::launch::async, [&] {
    return Worker::start(config, environment(coordinator, &clock)).status();
  });
  // Time passes on the Worker's clock, a minute at a time, until the start gives up (the
  // first jump may come before the move has even taken its deadline from the clock).
  const Deadline limit = Deadline::after(seconds(20));
  while (started.wait_for(milliseconds(100)) != std::future_status::ready && !limit.passed()) {
    clock.advance(seconds(61));
  }
  ASSERT_EQ(started.wait_for(seconds(0)), std::future_status::ready)
      << "the start still waits after 20 s of real time and many minutes on its clock";
  const Status st = started.get();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_NE(st.message().find("before the recovery deadline"), std::string::npos)
      << st.to_string();
}

// A straggler: one member's steps take 1 s against the others' 100 ms. The straggler
// policy evicts it after 3 steps, it learns why, and the others carry on without it: in
// milliseconds.
TEST(WorkerRecovery, StragglerIsEvictedByThePolicyOnItsReportedStepTimes) {
  MemoryCoordinator coordinator(with_straggler_policy(3));
  const TimedRun run = run_timed_steps(coordinator, 3, 8, [](int member, int) -> Duration {
    return member == 2 ? seconds(1) : milliseconds(100);
  });
  EXPECT_EQ(run.ends[2].code(), StatusCode::kEvicted) << run.ends[2].to_string();
  EXPECT_NE(run.ends[2].message().find("straggler"), std::string::npos) << run.ends[2].to_string();
  EXPECT_FALSE(run.still_member(2));
  for (int t : {0, 1}) {
    EXPECT_TRUE(run.ends[t].is_ok()) << run.ends[t].to_string();
    EXPECT_EQ(run.contributors[t], 2);
  }
}

// Each step's report covers that step alone: a member slow in steps 2 and 4 only is slow
// in 2 of its last 5 steps, below the 3 that evict.
TEST(WorkerRecovery, StepTimingReportsEachStepOnce) {
  MemoryCoordinator coordinator(with_straggler_policy(3));
  const TimedRun run = run_timed_steps(coordinator, 3, 6, [](int member, int step) -> Duration {
    return member == 2 && (step == 2 || step == 4) ? seconds(1) : milliseconds(100);
  });
  for (int t = 0; t < 3; ++t) {
    EXPECT_TRUE(run.ends[t].is_ok()) << "member " << t << ": " << run.ends[t].to_string();
    EXPECT_EQ(run.contributors[t], 3);
  }
  EXPECT_TRUE(run.still_member(2));
}

}  // namespace
}  // namespace tributary::agent
