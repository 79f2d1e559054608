// OS failures while a link is built are statuses (docs/errors.md), not aborts: an eventfd
// the OS refuses makes make_tcp_link return kInternal and close the sockets it was given.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "transport/tcp/tcp_link.h"

namespace tributary::testing {
namespace {

TEST(TcpLinkOs, NoEventfdIsInternalAndClosesTheSockets) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  // The lowest free descriptor number: with the soft limit there, eventfd gets EMFILE.
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);

  transport::TcpLinkParams params;
  params.rank = 0;
  params.size = 2;
  params.counters = std::make_shared<transport::LinkCounters>(2);
  auto link = transport::make_tcp_link(std::move(params), {transport::PeerSocket{1, pair[0], "test"}});
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);

  ASSERT_FALSE(link.is_ok());
  EXPECT_EQ(link.status().code(), StatusCode::kInternal) << link.status().to_string();
  EXPECT_NE(link.status().message().find("eventfd"), std::string::npos)
      << link.status().to_string();
  errno = 0;
  EXPECT_EQ(::fcntl(pair[0], F_GETFD), -1) << "the peer socket was not closed";
  EXPECT_EQ(errno, EBADF);
  ::close(pair[1]);
}

}  // namespace
}  // namespace tributary::testing
