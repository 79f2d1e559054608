// The fault-tolerance protocol end to end: a real coordinator on an ephemeral port, real
// CoordinatorClients on threads (docs/fault-tolerance.md). Every wait has a deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "control_client/coordinator_client.h"
#include "coordinator/coordinator.h"
#include "tests/support/rank_threads.h"

namespace tributary::coordinator {
namespace {

using control_client::ClientConfig;
using control_client::CoordinatorClient;
using control_client::Go;
using membership::ReadyReport;
using membership::View;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "ft secret";

Deadline soon() { return Deadline::after(seconds(10)); }

// Lines go to stderr, prefixed with who wrote them (several clients share one process).
Logger logger(std::string who) {
  return Logger(who, [who](const LogRecord& r) {
    std::fprintf(stderr, "[%s] %s\n", who.c_str(), format_log_line(r, LogFormat::kText).c_str());
  });
}

CoordinatorConfig base_config(std::size_t initial) {
  CoordinatorConfig c;
  c.secret = kSecret;
  c.metrics_address.clear();
  c.initial_world_size = initial;
  c.heartbeat_interval = milliseconds(50);
  c.heartbeat_timeout = seconds(5);  // long: removals in these tests come from the protocol
  c.straggler.enabled = false;
  return c;
}

// Polls `done` every 5 ms until the deadline.
template <typename F>
bool eventually(F done, Deadline deadline = soon()) {
  while (!deadline.passed()) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

class FaultToleranceTest : public ::testing::Test {
 protected:
  void start(CoordinatorConfig config) {
    config_ = config;
    coordinator_ = std::make_unique<Coordinator>(std::move(config), logger("coordinator"));
    Status st = coordinator_->start();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  ClientConfig client_config(const std::string& name) {
    ClientConfig c;
    c.endpoint = coordinator_->endpoint();
    c.secret = kSecret;
    c.host = "h-" + name;
    c.data_address = "127.0.0.1:7000";
    c.name = name;
    return c;
  }
  // Joins n clients concurrently and waits for view 1 on each.
  std::vector<std::unique_ptr<CoordinatorClient>> join_world(int n) {
    std::vector<std::unique_ptr<CoordinatorClient>> clients(static_cast<std::size_t>(n));
    auto results = testing::run_ranks(n, [&](int r) -> Status {
      auto& c = clients[static_cast<std::size_t>(r)];
      c = std::make_unique<CoordinatorClient>(logger("agent" + std::to_string(r)));
      auto j = c->join(client_config("agent" + std::to_string(r)), soon());
      if (!j) return j.status();
      return c->wait_for_view(1, soon()).status();
    });
    for (const auto& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
    return clients;
  }
  // Every client sends Ready for its current view; returns the Go each got. A client that
  // leaves epoch `previous` first waits for a view after it: a Ready for the old view
  // would only repeat that view's Go.
  std::vector<Result<Go>> ready_all(std::vector<CoordinatorClient*> clients,
                                    std::uint64_t committed = 0, membership::Epoch previous = 0) {
    std::vector<Result<Go>> gos(clients.size(),
                                Result<Go>(error(StatusCode::kInternal, "not run")));
    testing::run_ranks(static_cast<int>(clients.size()), [&](int r) -> Status {
      auto* c = clients[static_cast<std::size_t>(r)];
      if (previous != 0) TRIB_RETURN_IF_ERROR(c->wait_for_view(previous + 1, soon()).status());
      for (;;) {
        const View v = c->view();
        auto go = c->ready({v.epoch, previous, committed, 0}, soon());
        if (!go && go.status().code() == StatusCode::kAborted && c->view().epoch > v.epoch)
          continue;  // superseded
        gos[static_cast<std::size_t>(r)] = go;
        return go.status();
      }
    });
    return gos;
  }

  CoordinatorConfig config_;
  std::unique_ptr<Coordinator> coordinator_;
};

std::vector<CoordinatorClient*> raw(const std::vector<std::unique_ptr<CoordinatorClient>>& v) {
  std::vector<CoordinatorClient*> out;
  for (const auto& c : v) out.push_back(c.get());
  return out;
}

TEST_F(FaultToleranceTest, ReadyGoRoundGivesEveryMemberTheSameGo) {
  start(base_config(3));
  auto clients = join_world(3);
  auto gos = ready_all(raw(clients), 0);
  for (const auto& g : gos) {
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->epoch, 1u);
    EXPECT_EQ(g->commit_through, 0u);
    EXPECT_TRUE(g->joiners.empty());
    EXPECT_EQ(g->state_source, 0u) << "a fresh start has nobody to sync state from";
  }
  // Ready for a superseded epoch answers kAborted; Ready without Go times out.
  EXPECT_EQ(clients[0]->ready({1, 0, 0, 0}, soon()).value().epoch, 1u)
      << "a repeat gets the same Go";
}

TEST_F(FaultToleranceTest, MemberThatNeverSendsReadyIsRemoved) {
  CoordinatorConfig cfg = base_config(3);
  cfg.ready_timeout = milliseconds(300);
  start(cfg);
  auto clients = join_world(3);
  const auto silent = clients[2]->member_id();
  auto gos = ready_all({clients[0].get(), clients[1].get()});
  for (const auto& g : gos) {
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->epoch, 2u)
        << "epoch 1 was abandoned; the Go is for the view without the silent member";
  }
  EXPECT_FALSE(clients[0]->view().contains(silent));
  EXPECT_EQ(clients[2]->wait_for_view(2, soon()).status().code(), StatusCode::kEvicted);
}

TEST_F(FaultToleranceTest, BoundaryAdmitsJoinersAndLetsALeaverGoCleanly) {
  start(base_config(2));
  auto clients = join_world(2);
  for (const auto& g : ready_all(raw(clients), 4)) ASSERT_TRUE(g.is_ok());

  CoordinatorClient joiner(logger("joiner"));
  auto j = joiner.join(client_config("joiner"), soon());
  ASSERT_TRUE(j.is_ok()) << j.status().to_string();
  EXPECT_EQ(j->view.epoch, 0u) << "waits for a step boundary";
  ASSERT_TRUE(eventually([&] { return clients[0]->joiners_pending(); }))
      << "announced in heartbeat acks";

  const auto leaver = clients[1]->member_id();
  clients[0]->request_boundary(1, false);
  clients[1]->request_boundary(1, true);
  ASSERT_TRUE(eventually([&] { return clients[1]->left(); })) << "the leaver gets LeaveAck";
  const TimePoint t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(clients[1]->leave(soon()).is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(50))
      << "leave() after LeaveAck returns at once";

  auto v = joiner.wait_for_view(2, soon());
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  EXPECT_EQ(v->epoch, 2u);
  EXPECT_EQ(v->size(), 2u);
  EXPECT_FALSE(v->contains(leaver));
  auto gos = ready_all({clients[0].get(), &joiner}, 4, 1);
  for (const auto& g : gos) {
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->epoch, 2u);
    EXPECT_EQ(g->joiners, std::vector<membership::MemberId>{joiner.member_id()});
    EXPECT_EQ(g->state_source, clients[0]->member_id());
  }
  EXPECT_TRUE(eventually([&] { return !clients[0]->joiners_pending(); }));
}

TEST_F(FaultToleranceTest, FailureReportAboutACrashedMemberGivesANewViewQuickly) {
  start(base_config(3));  // heartbeat timeout 5 s: only the report can be this fast
  auto clients = join_world(3);
  for (const auto& g : ready_all(raw(clients))) ASSERT_TRUE(g.is_ok());
  const auto dead = clients[2]->member_id();
  clients[2].reset();  // crash: heartbeats stop
  const TimePoint t0 = std::chrono::steady_clock::now();
  clients[0]->report_failure(1, dead, "recv from rank 2 timed out");
  auto v = clients[1]->wait_for_view(2, soon());
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(v->contains(dead));
  EXPECT_LT(took, milliseconds(1500)) << "confirm_silence is 3 heartbeat intervals (150 ms here)";
  auto gos = ready_all({clients[0].get(), clients[1].get()}, 9, 1);
  for (const auto& g : gos) {
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->commit_through, 9u);
  }
}

TEST_F(FaultToleranceTest, CoordinatorRestartFromTheJournalKeepsMemberIdsAndMovesEpochsOn) {
  char dir[] = "/tmp/tributary-ft-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string journal = std::string(dir) + "/journal";
  CoordinatorConfig cfg = base_config(2);
  cfg.journal_path = journal;
  start(cfg);
  auto clients = join_world(2);
  for (const auto& g : ready_all(raw(clients), 3)) ASSERT_TRUE(g.is_ok());
  const auto ids =
      std::vector<membership::MemberId>{clients[0]->member_id(), clients[1]->member_id()};
  const auto old_instance = coordinator_->instance_id();

  // kill -9, as far as the journal is concerned: no shutdown hook writes anything.
  cfg.bind_address = coordinator_->endpoint();
  coordinator_.reset();
  coordinator_ = std::make_unique<Coordinator>(cfg, logger("coordinator2"));
  ASSERT_TRUE(coordinator_->start().is_ok());
  EXPECT_NE(coordinator_->instance_id(), old_instance);

  for (auto& c : clients) {
    auto v = c->wait_for_view(2, soon());
    ASSERT_TRUE(v.is_ok()) << v.status().to_string();
    EXPECT_GT(v->epoch, 1u) << "a restarted coordinator never reissues an epoch";
    EXPECT_EQ(v->size(), 2u);
    EXPECT_TRUE(v->contains(ids[0]) && v->contains(ids[1])) << "same member ids";
  }
  EXPECT_EQ(clients[0]->member_id(), ids[0]);
  auto gos = ready_all(raw(clients), 3, 1);
  for (const auto& g : gos) {
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->commit_through, 3u);
    EXPECT_TRUE(g->joiners.empty()) << "resumed members keep their state";
  }
  for (auto& c : clients) EXPECT_TRUE(c->health().is_ok()) << c->health().to_string();

  // A new member after the restart gets an id never handed out before.
  CoordinatorClient late(logger("late"));
  auto j = late.join(client_config("late"), soon());
  ASSERT_TRUE(j.is_ok());
  EXPECT_GT(j->member_id, std::max(ids[0], ids[1]));
  for (auto& c : clients) c->leave(soon()).is_ok();
  late.leave(soon()).is_ok();
  coordinator_.reset();
  ::unlink(journal.c_str());
  ::rmdir(dir);
}

TEST_F(FaultToleranceTest, StragglerIsEvictedAndItsEarlyRejoinIsRefusedWithTheReason) {
  CoordinatorConfig cfg = base_config(3);
  cfg.straggler.enabled = true;
  cfg.straggler.k = 2;
  cfg.straggler.m = 1;
  cfg.straggler.w = 1;
  cfg.straggler.floor_seconds = 0.01;
  cfg.straggler.min_world_size = 2;
  cfg.straggler.cooldown = seconds(60);
  start(cfg);
  auto clients = join_world(3);
  for (const auto& g : ready_all(raw(clients))) ASSERT_TRUE(g.is_ok());
  // The first timing after entering the view spans the join: not judged.
  for (auto& c : clients) c->report_step(0, 0.1);
  clients[0]->report_step(1, 0.1);
  clients[1]->report_step(1, 0.1);
  clients[2]->report_step(1, 1.0);
  EXPECT_EQ(clients[2]->wait_for_view(2, soon()).status().code(), StatusCode::kEvicted);
  auto v = clients[0]->wait_for_view(2, soon());
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->size(), 2u);
  CoordinatorClient again(logger("again"));
  auto j = again.join(client_config("agent2"), soon());
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(j.status().message().find("cool-down"), std::string::npos) << j.status().to_string();
}

}  // namespace
}  // namespace tributary::coordinator
