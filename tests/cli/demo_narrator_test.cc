// The demo's narration (cli/demo_narrator.h) and the agents' progress events
// (cli/demo_events.h), without processes: scripted faults, steps and view changes in,
// lines and fault records out.
#include "cli/demo_narrator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/demo_events.h"

namespace tributary::cli {
namespace {

constexpr std::int64_t kUnix0 = 1'800'000'000'000;
constexpr std::int64_t kStepUs = 30'000;

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

membership::ViewChange change(std::uint64_t epoch, std::string cause, std::uint32_t size,
                              std::vector<membership::MemberRef> joined_refs,
                              std::vector<membership::MemberRef> removed_refs,
                              std::int64_t unix_ms) {
  membership::ViewChange c;
  c.epoch = epoch;
  c.cause = std::move(cause);
  c.size = size;
  c.joined = std::move(joined_refs);
  c.removed = std::move(removed_refs);
  c.unix_ms = unix_ms;
  return c;
}

// A script: four workers (pids 101..104) and steps 1..`through` at kStepUs apart in view 1.
struct Script {
  DemoNarrator n{10, 0};
  std::vector<std::string> lines;
  long step = 0;
  std::int64_t now_us = 0;

  Script() {
    for (int w = 1; w <= 4; ++w) n.worker_started(w, 100 + w, false, 0, 0, kUnix0);
    show(n.view_change(change(1, "initial", 4, {}, {}, kUnix0)));
  }
  void show(const std::vector<std::string>& more) { lines.insert(lines.end(), more.begin(), more.end()); }
  void steps(int count, std::uint64_t view, int world, std::int64_t gap_us = kStepUs) {
    for (int i = 0; i < count; ++i) {
      now_us += gap_us;
      gap_us = kStepUs;
      ++step;
      show(n.event(1, StepEvent{step, 0, view, world, 0, 0.5, now_us}));
    }
  }
  std::int64_t unix_ms() const { return kUnix0 + now_us / 1000; }
  std::string text() const { return joined(lines); }
};

TEST(DemoEvents, RoundTripAndRejectHumanOrBrokenLines) {
  const DemoEvent step = StepEvent{125, 5, 3, 4, 1, 0.125, 987654321};
  auto back = parse_event(encode_event(step));
  ASSERT_TRUE(back);
  const auto& s = std::get<StepEvent>(*back);
  EXPECT_EQ(s.step, 125);
  EXPECT_EQ(s.data_epoch, 5);
  EXPECT_EQ(s.view, 3u);
  EXPECT_EQ(s.world, 4);
  EXPECT_EQ(s.rank, 1);
  EXPECT_DOUBLE_EQ(s.loss, 0.125);
  EXPECT_EQ(s.mono_us, 987654321);
  back = parse_event(encode_event(StateEvent{40, 38528, 0, std::string(64, 'a')}));
  ASSERT_TRUE(back);
  EXPECT_EQ(std::get<StateEvent>(*back).bytes, 38528u);
  EXPECT_EQ(std::get<StateEvent>(*back).sha256, std::string(64, 'a'));
  back = parse_event(encode_event(EvalEvent{40, 0.9711}));
  ASSERT_TRUE(back);
  EXPECT_NEAR(std::get<EvalEvent>(*back).accuracy, 0.9711, 1e-9);

  EXPECT_FALSE(parse_event("   125     5    0.1234"));  // the human table
  EXPECT_FALSE(parse_event("summary: 819 steps"));
  EXPECT_FALSE(parse_event("@step 1 2 3"));                    // truncated
  EXPECT_FALSE(parse_event("@step 1 0 1 4 0 0.5 100 extra"));  // padded
  EXPECT_FALSE(parse_event("@eval x 0.5"));
  EXPECT_FALSE(parse_event("@unknown 1"));
  back = parse_event(encode_event(FaultEvent{"kill", 100, 1764281025123}));
  ASSERT_TRUE(back && std::holds_alternative<FaultEvent>(*back));
  EXPECT_EQ(std::get<FaultEvent>(*back).kind, "kill");
  EXPECT_EQ(std::get<FaultEvent>(*back).step, 100);
  EXPECT_EQ(std::get<FaultEvent>(*back).unix_ms, 1764281025123);
  EXPECT_FALSE(parse_event("@fault reboot 100 1764281025123"));  // not a fault the demo raises
  EXPECT_FALSE(parse_event("@fault stop 100"));                  // truncated
}

TEST(DemoNarrator, MemberNamesGiveThePid) {
  EXPECT_EQ(pid_of_member_name("vm/tributary:16131"), 16131);
  EXPECT_EQ(pid_of_member_name("node-a/tributary:7"), 7);
  EXPECT_EQ(pid_of_member_name("no-pid"), 0);
  EXPECT_EQ(pid_of_member_name("x:12a"), 0);
  EXPECT_EQ(pid_of_member_name("x:"), 0);
  EXPECT_EQ(pid_of_member_name("x:12345678901"), 0);
}

TEST(DemoNarrator, KillIsAnsweredByAViewNamingWhoNoticedAndThePause) {
  Script r;
  r.steps(100, 1, 4);
  const std::int64_t killed_unix = r.unix_ms();
  r.show(r.n.fault(FaultKind::kKill, 4, 104, r.now_us, killed_unix));
  EXPECT_NE(r.text().find(">> step 100  kill -9 worker 4 (pid 104)"), std::string::npos)
      << r.text();
  r.show(r.n.view_change(change(2, "failure", 3, {},
                                {{4, "vm/tributary:104", "failure_confirmed", "vm/tributary:101"}},
                                killed_unix + 180)));
  EXPECT_NE(r.text().find("view 2 (failure): worker 4 removed (failure_confirmed), noticed by "
                          "worker 1, 180 ms after the kill -9; 3 workers"),
            std::string::npos)
      << r.text();
  EXPECT_FALSE(r.n.all_handled()) << "training has not gone on yet";
  r.steps(1, 2, 3, 300'000);  // the survivors' first step in view 2, 300 ms later
  EXPECT_NE(r.text().find("the survivors paused 300 ms (a step takes 30 ms); training goes on "
                          "at step 101 with 3 workers"),
            std::string::npos)
      << r.text();
  ASSERT_EQ(r.n.faults().size(), 1u);
  const FaultRecord& f = r.n.faults()[0];
  EXPECT_EQ(*f.view, 2u);
  EXPECT_EQ(f.noticed_by, "worker 1");
  EXPECT_EQ(*f.pause_us, 300'000);
  EXPECT_EQ(f.resumed_step, 101);
  EXPECT_TRUE(r.n.all_handled());
  const std::string summary = joined(r.n.summary());
  EXPECT_NE(summary.find("kill -9 worker 4"), std::string::npos) << summary;
  EXPECT_NE(summary.find("1 of 1 faults handled"), std::string::npos) << summary;
}

TEST(DemoNarrator, AViewSeenAfterTheStepsItProducedStillGivesThePause) {
  Script r;
  r.steps(50, 1, 4);
  r.show(r.n.fault(FaultKind::kKill, 3, 103, r.now_us, r.unix_ms()));
  r.steps(1, 2, 3, 250'000);
  r.steps(5, 2, 3);  // the status poll is late
  r.show(r.n.view_change(change(2, "failure", 3, {}, {{3, "vm/tributary:103", "heartbeat_timeout", ""}},
                                r.unix_ms())));
  EXPECT_NE(r.text().find("noticed by the coordinator (heartbeats stopped)"), std::string::npos)
      << r.text();
  EXPECT_EQ(*r.n.faults()[0].pause_us, 250'000);
  EXPECT_EQ(r.n.faults()[0].resumed_step, 51);
}

TEST(DemoNarrator, FrozenWorkerIsHandledOnlyOnceItIsBackWithVerifiedState) {
  Script r;
  r.steps(20, 1, 4);
  r.show(r.n.fault(FaultKind::kStop, 3, 103, r.now_us, r.unix_ms()));
  r.show(r.n.view_change(change(2, "failure", 3, {}, {{3, "vm/tributary:103", "heartbeat_timeout", ""}},
                                r.unix_ms() + 900)));
  r.steps(10, 2, 3, 950'000);
  r.show(r.n.continued(3, r.now_us));
  EXPECT_NE(r.text().find("it learns it was removed and joins again"), std::string::npos);
  EXPECT_FALSE(r.n.all_handled()) << "not back yet";
  r.show(r.n.event(3, StateEvent{30, 38528, 0, std::string(64, 'f')}));
  r.show(r.n.view_change(change(3, "boundary", 4, {{5, "vm/tributary:103", "", ""}}, {}, r.unix_ms())));
  r.steps(3, 3, 4);
  const std::string text = r.text();
  EXPECT_NE(text.find("worker 3 received 37.6 KiB of training state"), std::string::npos) << text;
  EXPECT_NE(text.find("view 3 (boundary): worker 3 back as a new member at a step boundary"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("worker 3 contributes again from step 31; 4 workers"), std::string::npos)
      << text;
  EXPECT_TRUE(r.n.all_handled()) << joined(r.n.summary());
}

TEST(DemoNarrator, JoinAndDrainAreNoFailures) {
  Script r;
  r.steps(30, 1, 4);
  r.show(r.n.worker_started(5, 105, true, r.step, r.now_us, r.unix_ms()));
  r.show(r.n.event(5, StateEvent{31, 1000, 0, std::string(64, 'e')}));
  r.show(r.n.view_change(change(2, "boundary", 5, {{5, "vm/tributary:105", "", ""}}, {}, r.unix_ms())));
  r.steps(10, 2, 5, 40'000);
  r.show(r.n.fault(FaultKind::kDrain, 2, 102, r.now_us, r.unix_ms()));
  r.show(r.n.view_change(change(3, "boundary", 4, {}, {{2, "vm/tributary:102", "left", ""}}, r.unix_ms())));
  r.steps(2, 3, 4);
  EXPECT_FALSE(r.n.all_handled()) << "the drained worker has not exited yet";
  r.show(r.n.exited(2, 0));
  const std::string text = r.text();
  EXPECT_NE(text.find("worker 5 starts (pid 105)"), std::string::npos) << text;
  EXPECT_NE(text.find("worker 2 removed (left) at a step boundary: nobody saw a failure"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("worker 2 left the cluster and exited cleanly"), std::string::npos) << text;
  EXPECT_TRUE(r.n.all_handled()) << joined(r.n.summary());
}

TEST(DemoNarrator, UnansweredFaultsAreNotHandledAndSaySo) {
  Script r;
  r.steps(10, 1, 4);
  r.show(r.n.fault(FaultKind::kKill, 4, 104, r.now_us, r.unix_ms()));
  r.show(r.n.fault(FaultKind::kDrain, 3, 103, r.now_us, r.unix_ms()));
  r.show(r.n.view_change(change(2, "failure", 3, {}, {{3, "vm/tributary:103", "heartbeat_timeout", ""}},
                                r.unix_ms())));
  r.steps(3, 2, 3);
  r.show(r.n.exited(3, 1));
  EXPECT_FALSE(r.n.all_handled());
  const std::string summary = joined(r.n.summary());
  EXPECT_NE(summary.find("NOT HANDLED: never removed"), std::string::npos) << summary;
  EXPECT_NE(summary.find("NOT HANDLED: removed as heartbeat_timeout"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("0 of 2 faults handled"), std::string::npos) << summary;
  EXPECT_NE(r.text().find("worker 3 was draining but exited with status 1"), std::string::npos);
}

TEST(DemoNarrator, TableRowsAndEndOfTrainingLeaves) {
  Script r;
  r.steps(20, 1, 4);
  const auto row = r.n.event(1, EvalEvent{20, 0.9});
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0], "    20     0    0.5000    90.00%      4     1     30.0");
  EXPECT_TRUE(r.n.event(1, EvalEvent{999, 0.9}).empty()) << "a step nobody reported";
  r.n.training_finished();
  EXPECT_TRUE(
      r.n.view_change(change(2, "leave", 3, {}, {{1, "vm/tributary:101", "left", ""}}, r.unix_ms()))
          .empty());
  EXPECT_TRUE(r.n.view_change(change(2, "leave", 3, {}, {}, r.unix_ms())).empty()) << "seen";
}

}  // namespace
}  // namespace tributary::cli
