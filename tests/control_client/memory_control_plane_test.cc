// The in-process control plane against the ControlPlane contract (control_plane.h): the
// real membership decisions, carried out to each member's plane, on the test's clock.
#include "control_client/memory_control_plane.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace tributary::control_client {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Deadline soon() { return Deadline::after(seconds(10)); }

membership::MembershipConfig config(std::size_t initial) {
  membership::MembershipConfig c;
  c.initial_world_size = initial;
  c.heartbeat_timeout = seconds(1);
  c.straggler.enabled = false;
  return c;
}

ClientConfig labels(const std::string& name) {
  ClientConfig c;
  c.endpoint = "memory";
  c.secret = "unused";
  c.host = "h-" + name;
  c.data_address = "127.0.0.1:7000";
  c.name = name;
  return c;
}

TEST(MemoryControlPlane, JoinWaitsForTheInitialWorldThenReadyGetsGo) {
  MemoryCoordinator coordinator(config(2));
  auto a = coordinator.connect();
  auto b = coordinator.connect();
  EXPECT_EQ(a->member_id(), 0u);
  auto ja = a->join(labels("a"), soon());
  ASSERT_TRUE(ja.is_ok());
  EXPECT_EQ(ja->view.epoch, 0u) << "no view before the initial world is complete";
  EXPECT_EQ(a->join(labels("a"), soon()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->wait_for_view(1, Deadline::after(milliseconds(1))).status().code(),
            StatusCode::kTimedOut);
  auto jb = b->join(labels("b"), soon());
  ASSERT_TRUE(jb.is_ok());
  EXPECT_EQ(jb->view.epoch, 1u);
  auto va = a->wait_for_view(1, soon());
  ASSERT_TRUE(va.is_ok());
  EXPECT_EQ(va->size(), 2u);
  Result<Go> go_a = error(StatusCode::kInternal, "not run");
  std::thread ready_a([&] { go_a = a->ready({1, 0, 0, 0}, soon()); });
  auto go_b = b->ready({1, 0, 0, 0}, soon());
  ready_a.join();
  ASSERT_TRUE(go_a.is_ok()) << go_a.status().to_string();
  ASSERT_TRUE(go_b.is_ok()) << go_b.status().to_string();
  EXPECT_EQ(go_a->epoch, 1u);
  EXPECT_EQ(go_b->commit_through, 0u);
  EXPECT_EQ(coordinator.views_issued(), 1);
}

TEST(MemoryControlPlane, SilencedMemberIsRemovedWhenTheClockPassesTheHeartbeatTimeout) {
  MemoryCoordinator coordinator(config(2));
  auto a = coordinator.connect();
  auto b = coordinator.connect();
  ASSERT_TRUE(a->join(labels("a"), soon()).is_ok());
  ASSERT_TRUE(b->join(labels("b"), soon()).is_ok());
  coordinator.advance(milliseconds(900));
  EXPECT_EQ(coordinator.member_count(), 2u) << "both heartbeat while time passes";
  coordinator.silence(b->member_id());
  coordinator.advance(milliseconds(900));
  EXPECT_EQ(coordinator.member_count(), 2u) << "silent for 900 ms only";
  coordinator.advance(milliseconds(200));
  EXPECT_EQ(coordinator.member_count(), 1u);
  EXPECT_EQ(b->wait_for_view(2, soon()).status().code(), StatusCode::kEvicted);
  auto va = a->wait_for_view(2, soon());
  ASSERT_TRUE(va.is_ok());
  EXPECT_EQ(va->size(), 1u);
  EXPECT_TRUE(b->leave(soon()).is_ok()) << "leaving when already out is ok";
}

TEST(MemoryControlPlane, LeaveIssuesAViewWithoutTheMemberAndEndsItsWaits) {
  MemoryCoordinator coordinator(config(2));
  auto a = coordinator.connect();
  auto b = coordinator.connect();
  ASSERT_TRUE(a->join(labels("a"), soon()).is_ok());
  ASSERT_TRUE(b->join(labels("b"), soon()).is_ok());
  ASSERT_TRUE(b->leave(soon()).is_ok());
  EXPECT_EQ(b->wait_for_view(2, soon()).status().code(), StatusCode::kAborted);
  auto va = a->wait_for_view(2, soon());
  ASSERT_TRUE(va.is_ok());
  EXPECT_EQ(va->size(), 1u);
}

TEST(MemoryControlPlane, AListenerHearsNewerViewsAndTheEvictionOnThePlanesThread) {
  MemoryCoordinator coordinator(config(2));
  auto a = coordinator.connect();
  auto b = coordinator.connect();
  ASSERT_TRUE(a->join(labels("a"), soon()).is_ok());
  ASSERT_TRUE(b->join(labels("b"), soon()).is_ok());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Result<membership::View>> heard;
  b->set_view_listener([&](const Result<membership::View>& news) {
    std::lock_guard lock(mu);
    heard.push_back(news);
    cv.notify_all();
  });
  auto first = [&](std::size_t n) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, seconds(10), [&] { return heard.size() >= n; });
    return heard;
  };
  auto c = coordinator.connect();
  ASSERT_TRUE(c->join(labels("c"), soon()).is_ok());  // a joiner waits for a boundary
  ASSERT_TRUE(a->leave(soon()).is_ok());              // view 2: b alone (c still waits)
  auto news = first(1);
  ASSERT_EQ(news.size(), 1u);
  ASSERT_TRUE(news[0].is_ok()) << news[0].status().to_string();
  EXPECT_EQ(news[0]->epoch, 2u);
  EXPECT_EQ(news[0]->size(), 1u);
  coordinator.silence(b->member_id());
  coordinator.advance(seconds(2));
  news = first(2);
  ASSERT_GE(news.size(), 2u);
  EXPECT_EQ(news.back().status().code(), StatusCode::kEvicted);
  b->set_view_listener(nullptr);  // returns with no call in progress
  EXPECT_EQ(first(2).size(), 2u) << "the eviction is told once";
}

TEST(MemoryControlPlane, RestartContinuesEpochsAndRemovesWhoDoesNotResume) {
  MemoryCoordinator coordinator(config(3));
  std::vector<std::unique_ptr<ControlPlane>> planes;
  for (const char* name : {"a", "b", "c"}) {
    planes.push_back(coordinator.connect());
    ASSERT_TRUE(planes.back()->join(labels(name), soon()).is_ok());
  }
  auto late = coordinator.connect();
  ASSERT_TRUE(late->join(labels("late"), soon()).is_ok());  // pending: after the first view
  const membership::Epoch before = coordinator.view().epoch;
  const int views_before = coordinator.views_issued();
  coordinator.silence(planes[2]->member_id());
  coordinator.restart();
  EXPECT_EQ(coordinator.views_issued(), views_before)
      << "no view until the journaled members resumed";
  EXPECT_EQ(late->wait_for_view(1, soon()).status().code(), StatusCode::kEvicted);
  coordinator.advance(membership::MembershipConfig{}.resume_timeout + milliseconds(1));
  const membership::View after = coordinator.view();
  EXPECT_GT(after.epoch, before) << "epochs never go backwards across a restart";
  EXPECT_EQ(after.size(), 2u);
  auto va = planes[0]->wait_for_view(after.epoch, soon());
  ASSERT_TRUE(va.is_ok());
  EXPECT_NE(va->find(planes[0]->member_id()), nullptr) << "a resumed member keeps its id";
  EXPECT_EQ(planes[2]->wait_for_view(after.epoch, soon()).status().code(), StatusCode::kEvicted);
}

}  // namespace
}  // namespace tributary::control_client
