// transport::knock (transport/tcp/knock.h): whether anything listens at a member's
// addresses, as the redialer asks it for a pair whose every path failed: a listener
// answers (and drops the knock without a word), a closed port refuses, an address list
// where one listens is alive, garbage is refused before any connection.
#include "transport/tcp/knock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace tributary::transport {
namespace {

Deadline soon() { return Deadline::after(std::chrono::seconds(2)); }

// A loopback socket bound to an ephemeral port, listening or not; its "127.0.0.1:port".
struct Port {
  explicit Port(bool listen) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    if (listen) {
      EXPECT_EQ(::listen(fd, 4), 0);
    }
  }
  ~Port() { ::close(fd); }
  int fd = -1;
  std::string address;
};

TEST(Knock, AListenerAnswers) {
  Port p(/*listen=*/true);
  EXPECT_TRUE(knock({p.address}, soon()).is_ok());
}

TEST(Knock, APortWhereNothingListensRefusesAndSaysTheProcessIsGone) {
  Port bound_only(/*listen=*/false);  // holds the port, so nobody else takes it meanwhile
  const Status st = knock({bound_only.address}, soon());
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
  EXPECT_NE(st.message().find("refused"), std::string::npos) << st.to_string();
}

TEST(Knock, OneListeningAddressOfSeveralIsEnough) {
  Port closed(/*listen=*/false);
  Port open(/*listen=*/true);
  EXPECT_TRUE(knock({closed.address, open.address}, soon()).is_ok());
  EXPECT_EQ(knock({closed.address, closed.address}, soon()).code(), StatusCode::kPeerLost);
}

TEST(Knock, BadAddressesAreRefusedBeforeAnyConnection) {
  EXPECT_EQ(knock({}, soon()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(knock({"no-port"}, soon()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(knock({"[::1:5"}, soon()).code(), StatusCode::kInvalidArgument);
}

TEST(Knock, ADeadlineThatHasPassedIsNoAnswerNotAVerdict) {
  // A connect to a routable address that never answers would take the whole deadline; one
  // already passed must not be read as "gone".
  const Status st = knock({"10.255.255.1:9"}, Deadline{std::chrono::steady_clock::now()});
  EXPECT_NE(st.code(), StatusCode::kPeerLost) << st.to_string();
}

}  // namespace
}  // namespace tributary::transport
