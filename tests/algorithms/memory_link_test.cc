// The in-memory link (algorithms/memory_link.h) keeps Link's matching rule as the real
// transports do: messages with the same (peer, tag) go to the receives in the order the
// receives were posted, whichever receive is tested first. The failover link's tests
// depend on it: it tests its receives in its own order, and once took a later message
// for an earlier receive here (FailoverLink.SameTagOrderSurvivesAMove, 2-3% of runs).
#include "algorithms/memory_link.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <vector>

namespace tributary::algorithms {
namespace {

using Handle = Link::Handle;
constexpr Tag kTag{7, 0, 1};

std::array<std::byte, 4> bytes(int v) {
  std::array<std::byte, 4> b{};
  b.fill(static_cast<std::byte>(v));
  return b;
}

// Rank 0 sends to rank 1, which has posted two receives of one tag, `a` then `b`.
struct MemoryLinkTwoReceives : ::testing::Test {
  MemoryFabric fabric{2};
  PollableLink& to = fabric.pollable(1);
  PollableLink& from = fabric.pollable(0);
  std::array<std::byte, 4> first{};
  std::array<std::byte, 4> second{};
  const Handle a = to.recv(0, kTag, first);
  const Handle b = to.recv(0, kTag, second);
};

TEST_F(MemoryLinkTwoReceives, SameTagMessagesGoToReceivesInPostOrderWhateverIsTestedFirst) {
  // Only the first message is in: the second receive, tested first, must not take it.
  const auto one = bytes(1);
  ASSERT_TRUE(from.wait(from.send(1, kTag, one), Deadline::after(std::chrono::seconds(1))).is_ok());
  EXPECT_FALSE(to.test(b));
  const auto two = bytes(2);
  ASSERT_TRUE(from.wait(from.send(1, kTag, two), Deadline::after(std::chrono::seconds(1))).is_ok());
  EXPECT_TRUE(to.test(b));
  EXPECT_TRUE(to.test(a));
  EXPECT_TRUE(to.wait(b, Deadline::after(std::chrono::seconds(1))).is_ok());
  EXPECT_TRUE(to.wait(a, Deadline::after(std::chrono::seconds(1))).is_ok());
  EXPECT_EQ(first, one);
  EXPECT_EQ(second, two);
}

TEST_F(MemoryLinkTwoReceives, AWithdrawnReceiveLeavesItsMessageToTheNext) {
  // A wait whose deadline has passed withdraws a receive that has nothing yet.
  EXPECT_EQ(to.wait(a, Deadline{TimePoint::min()}).code(), StatusCode::kTimedOut);
  const auto one = bytes(1);
  ASSERT_TRUE(from.wait(from.send(1, kTag, one), Deadline::after(std::chrono::seconds(1))).is_ok());
  EXPECT_TRUE(to.wait(b, Deadline::after(std::chrono::seconds(1))).is_ok());
  EXPECT_EQ(second, one);
}

TEST(MemoryLink, OnlyMessagesNoPostedReceiveWillTakeAreReportedEarly) {
  MemoryFabric fabric(2);
  PollableLink& to = fabric.pollable(1);
  PollableLink& from = fabric.pollable(0);
  std::array<std::byte, 4> in{};
  const Handle a = to.recv(0, kTag, in);
  const auto one = bytes(1);
  const auto two = bytes(2);
  const auto deadline = Deadline::after(std::chrono::seconds(1));
  ASSERT_TRUE(from.wait(from.send_stamped(1, kTag, one, 11), deadline).is_ok());
  ASSERT_TRUE(from.wait(from.send_stamped(1, kTag, two, 12), deadline).is_ok());
  std::vector<EarlyArrival> early;
  to.report_early(0, early);
  ASSERT_EQ(early.size(), 1u);
  EXPECT_EQ(early[0].stamp, 12u);
  EXPECT_TRUE(to.test(a));
  EXPECT_EQ(to.stamp(a), 11u);
  EXPECT_TRUE(to.wait(a, deadline).is_ok());
  EXPECT_EQ(in, one);
}

}  // namespace
}  // namespace tributary::algorithms
