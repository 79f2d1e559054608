// The setup channel's helpers (transport/channel_io.h): how a link sees its peer go.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "transport/channel_io.h"

namespace tributary::transport {
namespace {

TEST(DrainChannel, DoorbellsAreReadAndDroppedWhileTheConnectionIsOpen) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  EXPECT_TRUE(drain_channel(fds[0], "rank 1").is_ok());  // nothing there yet
  const char doorbells[3] = {1, 1, 1};
  ASSERT_EQ(::send(fds[1], doorbells, sizeof doorbells, 0), 3);
  EXPECT_TRUE(drain_channel(fds[0], "rank 1").is_ok());
  char rest = 0;
  EXPECT_EQ(::recv(fds[0], &rest, 1, MSG_DONTWAIT), -1) << "the doorbells were left unread";
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(DrainChannel, APeerThatClosedItsEndIsLostByName) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  const char doorbell = 1;
  ASSERT_EQ(::send(fds[1], &doorbell, 1, 0), 1);
  ::close(fds[1]);  // what was sent before the close is read first, then the close
  const Status lost = drain_channel(fds[0], "rank 3");
  EXPECT_EQ(lost.code(), StatusCode::kPeerLost);
  EXPECT_EQ(lost.message(), "rank 3 closed the connection");
  ::close(fds[0]);
}

TEST(DrainChannel, ASocketThatFailsSaysWhy) {
  const Status lost = drain_channel(-1, "rank 2");  // EBADF
  EXPECT_EQ(lost.code(), StatusCode::kPeerLost);
  EXPECT_NE(lost.message().find("rank 2 connection failed: "), std::string::npos) << lost.message();
}

}  // namespace
}  // namespace tributary::transport
