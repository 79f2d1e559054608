// The collective queue's contract (agent/collective_queue.h), one test per guarantee, with
// jobs the test controls (no Worker), and then real Workers behind queues.
#include "agent/collective_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/coordinator.h"

namespace tributary::agent {
namespace {

Deadline soon() { return Deadline::after(std::chrono::seconds(20)); }
Deadline already_passed() { return Deadline{std::chrono::steady_clock::now()}; }

Outcome outcome_with(int contributors) {
  Outcome o;
  o.contributors = contributors;
  return o;
}

// Spins (bounded) until the queue's thread has started the job.
bool started_in_time(const CollectiveTicket& t) {
  const Deadline deadline = soon();
  while (t.started_at() == TimePoint{}) {
    if (deadline.passed()) return false;
    std::this_thread::yield();
  }
  return true;
}

// A job that blocks until the test releases it.
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  CollectiveQueue::Job job(int contributors = 1) {
    auto f = opened;
    return [f, contributors]() -> Result<Outcome> {
      f.wait();
      return outcome_with(contributors);
    };
  }
};

TEST(CollectiveQueue, RunsJobsOneAtATimeInSubmissionOrderOnItsOwnThread) {
  CollectiveQueue queue;
  std::vector<int> order;
  std::mutex mu;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread::id> threads;
  std::vector<std::shared_ptr<const CollectiveTicket>> tickets;
  for (int i = 0; i < 50; ++i) {
    tickets.push_back(queue.submit("job", [&, i]() -> Result<Outcome> {
      if (running.fetch_add(1) != 0) overlapped = true;
      {
        std::lock_guard lock(mu);
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      }
      running.fetch_sub(1);
      return outcome_with(i);
    }));
  }
  for (int i = 0; i < 50; ++i) {
    auto r = tickets[i]->wait(soon());
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->contributors, i);
    EXPECT_EQ(tickets[i]->index(), static_cast<std::uint64_t>(i + 1));
    if (i > 0) {
      EXPECT_GE(tickets[i]->started_at(), tickets[i - 1]->finished_at());
    }
    EXPECT_LE(tickets[i]->started_at(), tickets[i]->finished_at());
  }
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  EXPECT_FALSE(overlapped);
  for (auto id : threads) {
    EXPECT_EQ(id, threads.front());
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(CollectiveQueue, SubmitReturnsWhileTheJobRunsAndAWaitHasADeadline) {
  CollectiveQueue queue;
  Gate gate;
  auto ticket = queue.submit("blocked", gate.job(3));
  EXPECT_FALSE(ticket->done());
  auto early = ticket->wait(already_passed());
  ASSERT_FALSE(early.is_ok());
  EXPECT_EQ(early.status().code(), StatusCode::kTimedOut);
  EXPECT_NE(early.status().message().find("blocked"), std::string::npos);
  EXPECT_EQ(queue.wait_idle(already_passed()).code(), StatusCode::kTimedOut);
  EXPECT_FALSE(queue.idle());
  gate.open.set_value();
  auto r = ticket->wait(soon());
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->contributors, 3);
  EXPECT_TRUE(queue.wait_idle(soon()).is_ok());
  EXPECT_TRUE(queue.idle());
}

TEST(CollectiveQueue, AFailedJobFailsItsTicketOnlyAndLaterJobsStillRun) {
  CollectiveQueue queue;
  auto a = queue.submit("a", [] { return Result<Outcome>(outcome_with(2)); });
  auto b = queue.submit("b", [] {
    return Result<Outcome>(error(StatusCode::kMismatch, "rank 1 sent float64, expected float32"));
  });
  auto c = queue.submit("c", [] { return Result<Outcome>(outcome_with(2)); });
  EXPECT_TRUE(a->wait(soon()).is_ok());
  auto rb = b->wait(soon());
  ASSERT_FALSE(rb.is_ok());
  EXPECT_EQ(rb.status().code(), StatusCode::kMismatch);
  EXPECT_NE(rb.status().message().find("float64"), std::string::npos);
  EXPECT_TRUE(c->wait(soon()).is_ok());
}

TEST(CollectiveQueue, AJobThatThrowsFailsWithInternal) {
  CollectiveQueue queue;
  auto t = queue.submit("throws", []() -> Result<Outcome> { throw std::runtime_error("boom"); });
  auto r = t->wait(soon());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("boom"), std::string::npos);
  EXPECT_TRUE(
      queue.submit("after", [] { return Result<Outcome>(outcome_with(1)); })->wait(soon()).is_ok());
}

TEST(CollectiveQueue, CompletionRunsOnceBeforeTheTicketIsDone) {
  CollectiveQueue queue;
  std::atomic<int> calls{0};
  std::atomic<int> seen_contributors{-1};
  std::shared_ptr<const CollectiveTicket> ticket;
  std::atomic<bool> done_during_callback{true};
  std::promise<std::shared_ptr<const CollectiveTicket>> published;
  auto published_ticket = published.get_future().share();
  Gate gate;
  ticket = queue.submit("with_callback", gate.job(4), [&](const Result<Outcome>& r) {
    ++calls;
    seen_contributors = r.is_ok() ? r->contributors : -2;
    done_during_callback = published_ticket.get()->done();
  });
  published.set_value(ticket);
  gate.open.set_value();
  ASSERT_TRUE(ticket->wait(soon()).is_ok());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(seen_contributors.load(), 4);
  EXPECT_FALSE(done_during_callback.load());
}

TEST(CollectiveQueue, CloseFailsQueuedJobsLetsTheRunningOneFinishAndRefusesNewOnes) {
  CollectiveQueue queue;
  Gate gate;
  std::atomic<int> ran{0};
  std::atomic<int> callbacks{0};
  auto running = queue.submit("running", gate.job(2), [&](const Result<Outcome>&) { ++callbacks; });
  std::vector<std::shared_ptr<const CollectiveTicket>> queued;
  for (int i = 0; i < 5; ++i) {
    queued.push_back(queue.submit(
        "queued",
        [&]() -> Result<Outcome> {
          ++ran;
          return outcome_with(2);
        },
        [&](const Result<Outcome>&) { ++callbacks; }));
  }
  // close() must find the first job running.
  ASSERT_TRUE(started_in_time(*running));
  queue.close(error(StatusCode::kEvicted, "the coordinator removed this member"));
  for (auto& t : queued) {
    ASSERT_TRUE(t->done());
    auto r = t->wait(already_passed());
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kEvicted);
  }
  auto late = queue.submit("late", [&]() -> Result<Outcome> {
    ++ran;
    return outcome_with(2);
  });
  ASSERT_TRUE(late->done());
  EXPECT_EQ(late->wait(already_passed()).status().code(), StatusCode::kEvicted);
  gate.open.set_value();
  auto r = running->wait(soon());
  ASSERT_TRUE(r.is_ok()) << "the job that was running finishes";
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(callbacks.load(), 6);
  EXPECT_TRUE(queue.wait_idle(soon()).is_ok());
}

TEST(CollectiveQueue, DestroyingTheQueueFailsWhatIsStillQueued) {
  std::vector<std::shared_ptr<const CollectiveTicket>> tickets;
  Gate gate;
  {
    CollectiveQueue queue;
    tickets.push_back(queue.submit("first", gate.job(1)));
    // The destructor fails this one first (on its own thread), which lets the first finish.
    tickets.push_back(queue.submit("queued", gate.job(1),
                                   [&](const Result<Outcome>&) { gate.open.set_value(); }));
    for (int i = 0; i < 2; ++i) tickets.push_back(queue.submit("queued", gate.job(1)));
    ASSERT_TRUE(started_in_time(*tickets[0]));
  }
  EXPECT_TRUE(tickets[0]->wait(already_passed()).is_ok());
  for (std::size_t i = 1; i < tickets.size(); ++i) {
    auto r = tickets[i]->wait(already_passed());
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  }
}

// Real Workers behind queues: three in-process members, each submitting a train of
// all-reduces of different sizes, then waiting for all of them.
TEST(CollectiveQueueWithWorkers, QueuedAllReducesMatchAcrossMembersAndReportContributors) {
  constexpr int kWorkers = 3;
  coordinator::CoordinatorConfig config;
  config.secret = "queue-secret";
  config.initial_world_size = kWorkers;
  config.metrics_address = "";
  coordinator::Coordinator coord(config, Logger("coordinator", [](const LogRecord&) {}));
  ASSERT_TRUE(coord.start().is_ok());
  const std::string endpoint = coord.endpoint();
  const std::vector<std::size_t> sizes = {1, 7, 1000, 65537, 3, 250000, 0, 12};
  std::vector<int> failures(kWorkers, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers; ++t) {
    threads.emplace_back([&, t] {
      WorkerConfig wc;
      wc.coordinator = endpoint;
      wc.secret = "queue-secret";
      wc.join_timeout = std::chrono::seconds(20);
      auto started = Worker::start(wc);
      if (!started) {
        ADD_FAILURE() << started.status().to_string();
        return;
      }
      Worker& w = **started;
      int bad = 0;
      {
        CollectiveQueue queue;
        std::vector<std::vector<float>> buffers;
        for (std::size_t n : sizes) buffers.emplace_back(n, static_cast<float>(w.rank() + 1));
        std::vector<std::shared_ptr<const CollectiveTicket>> tickets;
        for (auto& b : buffers) {
          tickets.push_back(queue.submit("all_reduce", [&w, &b] {
            return w.all_reduce(b.data(), b.data(), b.size(), DType::kFloat32, ReduceOp::kSum);
          }));
        }
        for (std::size_t i = 0; i < tickets.size(); ++i) {
          auto r = tickets[i]->wait(soon());
          if (!r) {
            ADD_FAILURE() << r.status().to_string();
            ++bad;
            continue;
          }
          bad += r->contributors != kWorkers;
          for (float v : buffers[i]) bad += v != 6.0f;  // 1 + 2 + 3
        }
        bad += !queue.wait_idle(soon()).is_ok();
      }
      bad += !w.leave().is_ok();
      failures[t] = bad;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kWorkers; ++t) EXPECT_EQ(failures[t], 0) << "worker " << t;
  coord.stop();
}

}  // namespace
}  // namespace tributary::agent
