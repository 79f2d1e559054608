// Federated rounds with ranks as threads: real Workers (loopback TCP links) over the
// in-process control plane (control_client/memory_control_plane.h), whose round logic runs
// on the fake clock. A member's "compute time" is when the test lets it call in: the test
// moves the coordinator's clock to each member's arrival, so a round's deadline passes
// without anyone sleeping. Every result is checked against a reference computed from
// exactly the contributors and weights the outcome names (inputs and weights are small
// integers, so every sum is exact in float and the reference is bit for bit whatever the
// reduction order; the one division is the Worker's own: float(double(sum) / total)).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "agent/worker.h"
#include "control_client/memory_control_plane.h"
#include "tests/agent/in_process_world.h"

namespace tributary::agent {
namespace {

using control_client::MemoryCoordinator;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kDeadline{1000};

using in_process::eventually;
using in_process::leave_all;
using in_process::membership_config;

// n Workers joined into the first view, indexed by rank, several chunks per round; with
// `clocks`, worker t steps on clock t and `clock_of_rank` says which clock each rank has.
std::vector<std::unique_ptr<Worker>> start_world(MemoryCoordinator& coordinator, int n,
                                                 std::vector<FakeClock>* clocks = nullptr,
                                                 std::vector<int>* clock_of_rank = nullptr) {
  return in_process::start_world(
      coordinator, n, {.chunk_bytes = 4096, .clocks = clocks, .clock_of_rank = clock_of_rank});
}

struct Member {
  std::vector<float> data;  // its update (the result, if it contributed)
  FederatedRound round;
  int arrival_ms = 0;  // after the round's first call
  Result<FederatedOutcome> outcome = error(StatusCode::kInternal, "not run");
};

// Runs one round: members call in the order of their arrival, the coordinator's clock at
// each arrival; late ones (arrival >= the first's + deadline) find the round closed.
void run_round(MemoryCoordinator& coordinator, std::vector<std::unique_ptr<Worker>>& workers,
               std::vector<Member>& members, std::uint64_t round) {
  std::vector<int> order(members.size());
  for (std::size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return members[static_cast<std::size_t>(a)].arrival_ms <
           members[static_cast<std::size_t>(b)].arrival_ms;
  });
  const int first = members[static_cast<std::size_t>(order[0])].arrival_ms;
  int clock_ms = first;
  std::size_t ready = 0;
  std::vector<std::thread> threads;
  for (int r : order) {
    Member& m = members[static_cast<std::size_t>(r)];
    if (m.arrival_ms > clock_ms) {
      coordinator.advance(milliseconds(m.arrival_ms - clock_ms));
      clock_ms = m.arrival_ms;
    }
    const bool on_time = m.arrival_ms < first + kDeadline.count();
    threads.emplace_back([&, r] {
      Member& me = members[static_cast<std::size_t>(r)];
      me.outcome = workers[static_cast<std::size_t>(r)]->federated_round(me.data.data(),
                                                                         me.data.size(), me.round);
    });
    if (on_time) {
      ++ready;
      // Its RoundReady is at the coordinator (or it made the round complete).
      ASSERT_TRUE(eventually([&] {
        return coordinator.round_ready_count(round) == ready ||
               coordinator.round_decision(round).has_value();
      }));
    } else {
      threads.back().join();  // late: told at once, without waiting for anyone
      threads.back() = std::thread([] {});
    }
  }
  if (clock_ms < first + kDeadline.count()) coordinator.advance(kDeadline);
  for (auto& th : threads) th.join();
}

// The weighted mean over `contributors` of each member's contribution (update + residual).
std::vector<float> reference(const FederatedOutcome& outcome,
                             const std::map<std::uint64_t, std::vector<float>>& contribution_of,
                             std::size_t count) {
  std::vector<float> sum(count, 0.0f);
  for (const Contribution& c : outcome.contributors) {
    const std::vector<float>& x = contribution_of.at(c.member_id);
    for (std::size_t i = 0; i < count; ++i) sum[i] += static_cast<float>(c.weight) * x[i];
  }
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(static_cast<double>(sum[i]) / outcome.total_weight);
  }
  return out;
}

// Seeded worlds: members with different compute times (arrivals) and weights, a deadline;
// the contributors hold exactly the reference of the outcome's contributors and weights,
// the late are told and untouched; in the next round everyone is on time and a late
// member's update enters the sum through its residual (kFoldIntoResidual) or not (kDrop).
TEST(WorkerFederated, ResultIsTheWeightedMeanOfExactlyTheReportedContributors) {
  for (std::uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const int n = std::uniform_int_distribution<int>(2, 5)(rng);
    const std::size_t count = seed % 2 ? 3001 : 17;
    const LatePolicy policy = seed % 3 == 0 ? LatePolicy::kDrop : LatePolicy::kFoldIntoResidual;
    MemoryCoordinator coordinator(membership_config(n));
    auto workers = start_world(coordinator, n);
    ASSERT_EQ(workers.size(), static_cast<std::size_t>(n));
    std::map<std::uint64_t, int> rank_of;
    for (int r = 0; r < n; ++r) rank_of[workers[static_cast<std::size_t>(r)]->member_id()] = r;

    std::vector<Member> members(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      Member& m = members[static_cast<std::size_t>(r)];
      m.data.resize(count);
      for (std::size_t i = 0; i < count; ++i)
        m.data[i] = static_cast<float>(std::uniform_int_distribution<int>(-50, 50)(rng));
      m.round.round = 1;
      m.round.weight = std::uniform_int_distribution<int>(1, 8)(rng);
      m.round.deadline = kDeadline;
      m.round.late = policy;
      m.round.tensor_id = 7;
      m.arrival_ms = std::uniform_int_distribution<int>(0, 2500)(rng);
    }
    members[static_cast<std::size_t>(seed % n)].arrival_ms = 0;  // someone opens at 0
    const std::vector<Member> before = members;
    run_round(coordinator, workers, members, 1);

    std::map<std::uint64_t, std::vector<float>> inputs;
    for (int r = 0; r < n; ++r) {
      inputs[workers[static_cast<std::size_t>(r)]->member_id()] =
          before[static_cast<std::size_t>(r)].data;
    }
    std::vector<Contribution> expected_contributors;
    for (int r = 0; r < n; ++r) {
      if (before[static_cast<std::size_t>(r)].arrival_ms < kDeadline.count()) {
        expected_contributors.push_back({workers[static_cast<std::size_t>(r)]->member_id(),
                                         before[static_cast<std::size_t>(r)].round.weight});
      }
    }
    std::vector<float> expected;
    std::set<int> late;
    for (int r = 0; r < n; ++r) {
      const Member& m = members[static_cast<std::size_t>(r)];
      ASSERT_TRUE(m.outcome.is_ok()) << "rank " << r << ": " << m.outcome.status().to_string();
      const FederatedOutcome& o = m.outcome.value();
      EXPECT_EQ(o.round, 1u);
      EXPECT_EQ(o.epoch, 1u);
      ASSERT_EQ(o.contributors.size(), expected_contributors.size()) << "rank " << r;
      for (std::size_t i = 0; i < o.contributors.size(); ++i) {
        EXPECT_EQ(o.contributors[i].member_id, expected_contributors[i].member_id);
        EXPECT_EQ(o.contributors[i].weight, expected_contributors[i].weight);
      }
      if (expected.empty()) expected = reference(o, inputs, count);
      const bool on_time = before[static_cast<std::size_t>(r)].arrival_ms < kDeadline.count();
      EXPECT_EQ(o.contributed, on_time) << "rank " << r;
      if (o.contributed) {
        ASSERT_EQ(std::memcmp(m.data.data(), expected.data(), count * sizeof(float)), 0)
            << "rank " << r << ": not the reference's bits";
      } else {
        late.insert(r);
        ASSERT_EQ(m.data, before[static_cast<std::size_t>(r)].data) << "a late member's data";
      }
    }
    // Nobody was evicted for being late.
    EXPECT_EQ(coordinator.views_issued(), 1);
    EXPECT_EQ(coordinator.view().size(), static_cast<std::size_t>(n));

    // Round 2: everyone on time. A late member of round 1 contributes x2 (+ x1 when folded).
    std::map<std::uint64_t, std::vector<float>> contribution;
    for (int r = 0; r < n; ++r) {
      Member& m = members[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < count; ++i) m.data[i] = static_cast<float>((r + 1) * 3 + i % 5);
      m.round.round = 2;
      m.arrival_ms = 0;
      std::vector<float> c = m.data;
      if (late.contains(r) && policy == LatePolicy::kFoldIntoResidual) {
        for (std::size_t i = 0; i < count; ++i) c[i] += before[static_cast<std::size_t>(r)].data[i];
      }
      contribution[workers[static_cast<std::size_t>(r)]->member_id()] = c;
    }
    run_round(coordinator, workers, members, 2);
    std::vector<float> expected2;
    for (int r = 0; r < n; ++r) {
      const Member& m = members[static_cast<std::size_t>(r)];
      ASSERT_TRUE(m.outcome.is_ok()) << m.outcome.status().to_string();
      EXPECT_TRUE(m.outcome->contributed) << "rank " << r << " contributes in the next round";
      EXPECT_EQ(m.outcome->contributors.size(), static_cast<std::size_t>(n));
      if (expected2.empty()) expected2 = reference(m.outcome.value(), contribution, count);
      ASSERT_EQ(std::memcmp(m.data.data(), expected2.data(), count * sizeof(float)), 0)
          << "rank " << r;
    }
    leave_all(workers);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(WorkerFederated, BelowMinParticipantsEveryMemberFailsAndNothingChanges) {
  constexpr int kN = 3;
  MemoryCoordinator coordinator(membership_config(kN));
  auto workers = start_world(coordinator, kN);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  auto make = [](int round, int arrival, int min, float value) {
    Member m;
    m.data.assign(5, value);
    m.round.round = static_cast<std::uint64_t>(round);
    m.round.weight = 2;
    m.round.deadline = kDeadline;
    m.round.min_participants = min;
    m.arrival_ms = arrival;
    return m;
  };
  // Round 1: rank 2 is late and folds its update (10) into its residual.
  std::vector<Member> one = {make(1, 0, 1, 1), make(1, 0, 1, 2), make(1, 1500, 1, 10)};
  run_round(coordinator, workers, one, 1);
  ASSERT_TRUE(one[2].outcome.is_ok());
  EXPECT_FALSE(one[2].outcome->contributed);
  // Round 2: two on time, min 3: fails on all three, the late one too; nothing changes.
  std::vector<Member> two = {make(2, 0, 3, 4), make(2, 0, 3, 5), make(2, 1200, 3, 6)};
  run_round(coordinator, workers, two, 2);
  for (int r = 0; r < kN; ++r) {
    const Member& m = two[static_cast<std::size_t>(r)];
    ASSERT_FALSE(m.outcome.is_ok()) << "rank " << r;
    EXPECT_EQ(m.outcome.status().code(), StatusCode::kRoundFailed);
    EXPECT_EQ(m.outcome.status().message(),
              "round 2: 2 of 3 members contributed by the deadline, fewer than "
              "min_participants 3");
    EXPECT_EQ(m.data, std::vector<float>(5, static_cast<float>(4 + r))) << "inputs untouched";
  }
  // Round 3: all on time; rank 2 contributes 7 + its residual 10 (not 6: the failed round
  // folded nothing), weight 2 each: mean (1 + 1 + 17) / 3 with weights cancelling.
  std::vector<Member> three = {make(3, 0, 3, 1), make(3, 0, 3, 1), make(3, 0, 3, 7)};
  run_round(coordinator, workers, three, 3);
  for (const Member& m : three) {
    ASSERT_TRUE(m.outcome.is_ok()) << m.outcome.status().to_string();
    EXPECT_EQ(m.outcome->total_weight, 6.0);
    EXPECT_EQ(m.data[0], static_cast<float>(2.0 * 19.0 / 6.0));
  }
  EXPECT_EQ(coordinator.views_issued(), 1);
  leave_all(workers);
}

// The straggler policy judges step timings; a member late for every round (it computes
// ten times longer) is not evicted for it: steps that ran a federated round are not
// reported (docs/federated.md).
TEST(WorkerFederated, ALateMemberIsNotEvictedAsAStraggler) {
  constexpr int kN = 3;
  MemoryCoordinator coordinator(membership_config(kN, /*straggler=*/true));
  std::vector<FakeClock> clocks(kN);
  std::vector<int> clock_of_rank;
  auto workers = start_world(coordinator, kN, &clocks, &clock_of_rank);
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
  for (int step = 1; step <= 7; ++step) {
    // Compute: 1 s on ranks 0 and 1, 10 s on rank 2 (k x median with k = 2: a straggler,
    // evicted after 3 of 5 steps if its timings were judged).
    for (int r = 0; r < kN; ++r) {
      clocks[static_cast<std::size_t>(clock_of_rank[static_cast<std::size_t>(r)])].advance(
          seconds(r == 2 ? 10 : 1));
    }
    std::vector<Member> members(kN);
    for (int r = 0; r < kN; ++r) {
      Member& m = members[static_cast<std::size_t>(r)];
      m.data.assign(4, 1.0f);
      m.round.round = static_cast<std::uint64_t>(step);
      m.round.deadline = kDeadline;
      m.arrival_ms = r == 2 ? 1500 : 0;  // rank 2 is late every round
    }
    run_round(coordinator, workers, members, static_cast<std::uint64_t>(step));
    ASSERT_TRUE(members[2].outcome.is_ok()) << members[2].outcome.status().to_string();
    EXPECT_FALSE(members[2].outcome->contributed);
    std::vector<Result<BoundaryOutcome>> boundaries(kN, error(StatusCode::kInternal, "not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < kN; ++r) {
      threads.emplace_back([&, r] {
        boundaries[static_cast<std::size_t>(r)] = workers[static_cast<std::size_t>(r)]->step_boundary();
      });
    }
    for (auto& th : threads) th.join();
    for (const auto& b : boundaries) ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  }
  EXPECT_EQ(coordinator.views_issued(), 1) << "nobody evicted";
  EXPECT_EQ(coordinator.view().size(), static_cast<std::size_t>(kN));
  leave_all(workers);
}

// A contributor dies after the data phase, before it tells the coordinator: no commit; the
// coordinator removes it, decides the round again with the survivors in the new epoch, and
// they re-run it from their original inputs: the result is exactly the survivors' mean.
TEST(WorkerFederated, AContributorLostMidRoundTheSurvivorsReRunWithoutIt) {
  for (int victim = 0; victim < 3; ++victim) {
    SCOPED_TRACE("victim rank " + std::to_string(victim));
    constexpr int kN = 3;
    MemoryCoordinator coordinator(membership_config(kN));
    auto workers = start_world(coordinator, kN);
    ASSERT_EQ(workers.size(), static_cast<std::size_t>(kN));
    const std::uint64_t victim_id = workers[static_cast<std::size_t>(victim)]->member_id();
    coordinator.lose_round_done(victim_id);
    std::vector<Member> members(kN);
    std::map<std::uint64_t, std::vector<float>> inputs;
    for (int r = 0; r < kN; ++r) {
      Member& m = members[static_cast<std::size_t>(r)];
      m.data.assign(1000, static_cast<float>(10 * (r + 1)));
      m.round.round = 5;
      m.round.weight = r + 1;
      m.round.deadline = kDeadline;
      inputs[workers[static_cast<std::size_t>(r)]->member_id()] = m.data;
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < kN; ++r) {
      threads.emplace_back([&, r] {
        Member& m = members[static_cast<std::size_t>(r)];
        m.outcome = workers[static_cast<std::size_t>(r)]->federated_round(m.data.data(),
                                                                          m.data.size(), m.round);
      });
    }
    ASSERT_TRUE(eventually([&] {
      auto d = coordinator.round_decision(5);
      return d && d->epoch == 1;
    }));
    coordinator.silence(victim_id);
    coordinator.advance(seconds(1) + milliseconds(1));  // the heartbeat timeout
    for (auto& th : threads) th.join();
    std::vector<float> expected;
    for (int r = 0; r < kN; ++r) {
      const Member& m = members[static_cast<std::size_t>(r)];
      if (r == victim) {
        ASSERT_FALSE(m.outcome.is_ok());
        EXPECT_EQ(m.outcome.status().code(), StatusCode::kEvicted);
        continue;
      }
      ASSERT_TRUE(m.outcome.is_ok()) << "rank " << r << ": " << m.outcome.status().to_string();
      EXPECT_TRUE(m.outcome->contributed);
      EXPECT_EQ(m.outcome->epoch, 2u);
      // 2: its data phase of epoch 1 was aborted; 1: the new view came before it started.
      EXPECT_GE(m.outcome->attempts, 1);
      EXPECT_LE(m.outcome->attempts, 2);
      EXPECT_EQ(m.outcome->contributors.size(), 2u);
      for (const Contribution& c : m.outcome->contributors) EXPECT_NE(c.member_id, victim_id);
      if (expected.empty()) expected = reference(m.outcome.value(), inputs, 1000);
      ASSERT_EQ(std::memcmp(m.data.data(), expected.data(), 1000 * sizeof(float)), 0);
    }
    leave_all(workers);
  }
}

TEST(WorkerFederated, BadArgumentsAreRefusedBeforeAnythingIsSent) {
  MemoryCoordinator coordinator(membership_config(1));
  auto workers = start_world(coordinator, 1);
  ASSERT_EQ(workers.size(), 1u);
  float x = 1;
  for (double w : {0.0, -2.0, std::nan(""), 1.0 / 0.0}) {
    FederatedRound r;
    r.weight = w;
    EXPECT_EQ(workers[0]->federated_round(&x, 1, r).status().code(), StatusCode::kInvalidArgument);
  }
  FederatedRound r;
  for (int min : {0, -1, 65537}) {
    r.min_participants = min;
    EXPECT_EQ(workers[0]->federated_round(&x, 1, r).status().code(), StatusCode::kInvalidArgument);
  }
  r = {};
  r.round = std::uint64_t{1} << 56;
  EXPECT_EQ(workers[0]->federated_round(&x, 1, r).status().code(), StatusCode::kInvalidArgument);
  r = {};
  r.deadline = milliseconds(0);
  EXPECT_EQ(workers[0]->federated_round(&x, 1, r).status().code(), StatusCode::kInvalidArgument);
  // Alone: a round of one commits its own update.
  r = {};
  r.round = 1;
  r.weight = 3;
  auto o = workers[0]->federated_round(&x, 1, r);
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_EQ(x, 1.0f);
  EXPECT_EQ(o->total_weight, 3.0);
  leave_all(workers);
}

}  // namespace
}  // namespace tributary::agent
