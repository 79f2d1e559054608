// The endpoint's accept loop against strangers who hold connections: a cap on unfinished
// handshakes (the oldest is evicted), and out of file descriptors, room made by closing
// the oldest handshake, or a back-off instead of a spin when there is none to close.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <regex>

#include "tests/agent/tcp_test_util.h"
#include "tests/support/descriptors_exhausted.h"

namespace tributary::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A loopback TCP socket, created now and connected on demand (connect needs no new
// descriptor, so it still works once the process is at its limit), from 127.0.0.1 or
// from another loopback address.
class Stranger {
 public:
  explicit Stranger(const char* source = nullptr) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (source == nullptr) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &a.sin_addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  ~Stranger() {
    if (fd_ >= 0) ::close(fd_);
  }
  Stranger(const Stranger&) = delete;
  Stranger& operator=(const Stranger&) = delete;
  bool connect(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  // True once the endpoint closed it, within `within`.
  bool closed_within(Duration within) {
    const Deadline deadline = Deadline::after(within);
    for (;;) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline.at - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char c;
      const ssize_t n = ::recv(fd_, &c, 1, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    }
  }
  bool send(std::string_view s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }

 private:
  int fd_;
};

double cpu_seconds_of_process() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int count_lines(const LogCapture& logs, const std::string& pattern) {
  const std::string all = logs.dump();
  const std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(all.begin(), all.end(), re), std::sregex_iterator()));
}

std::unique_ptr<transport::TcpEndpoint> listen(LogCapture& logs, std::size_t max_handshaking,
                                           std::size_t per_source = 32) {
  transport::TcpEndpointConfig config = test_config(logs, 0);
  config.bind_host = "0.0.0.0";            // reachable from 127.0.0.2 too
  config.handshake_timeout = seconds(30);  // nothing below may rely on it
  config.max_handshaking = max_handshaking;
  config.max_handshaking_per_source = per_source;
  auto ep = transport::TcpEndpoint::listen(config);
  if (!ep.is_ok()) throw std::runtime_error(ep.status().to_string());
  return std::move(*ep);
}

TEST(TcpEndpointLimits, UnfinishedHandshakesBeyondTheCapEvictTheOldest) {
  LogCapture logs;
  auto ep = listen(logs, 8);
  std::vector<std::unique_ptr<Stranger>> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(std::make_unique<Stranger>());
    ASSERT_TRUE(idle.back()->connect(ep->port()));
  }
  // The first 32 are evicted long before the 30 s handshake deadline; the last 8 stay.
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(idle[i]->closed_within(seconds(10))) << i;
  for (int i = 32; i < 40; ++i) EXPECT_FALSE(idle[i]->closed_within(milliseconds(50))) << i;
  EXPECT_GE(ep->stats().handshakes_rejected, 32u);
  // 32 refusals, a handful of log lines.
  EXPECT_LE(count_lines(logs, "rejected connection from"), 5) << logs.dump();
}

TEST(TcpEndpointLimits, AFloodFromOneAddressEvictsItsOwnConnectionsNotAPeers) {
  LogCapture logs;
  auto ep = listen(logs, 16, 4);
  // A peer's handshake in progress (it connected, its hello is on the way)...
  Stranger peer;
  ASSERT_TRUE(peer.connect(ep->port()));
  // ...and a flood from another address: beyond 4 of its own, each evicts its oldest.
  std::vector<std::unique_ptr<Stranger>> flood;
  for (int i = 0; i < 40; ++i) {
    flood.push_back(std::make_unique<Stranger>("127.0.0.2"));
    ASSERT_TRUE(flood.back()->connect(ep->port()));
  }
  for (int i = 0; i < 36; ++i) EXPECT_TRUE(flood[i]->closed_within(seconds(10))) << i;
  EXPECT_FALSE(peer.closed_within(milliseconds(100))) << "the flood evicted the peer";
  for (int i = 36; i < 40; ++i) EXPECT_FALSE(flood[i]->closed_within(milliseconds(20))) << i;
}

TEST(TcpEndpointLimits, OutOfDescriptorsTheOldestHandshakeMakesRoom) {
  LogCapture logs;
  auto ep = listen(logs, 256);
  std::vector<std::unique_ptr<Stranger>> early, late;
  for (int i = 0; i < 4; ++i) {
    early.push_back(std::make_unique<Stranger>());
    ASSERT_TRUE(early.back()->connect(ep->port()));
  }
  for (int i = 0; i < 4; ++i) late.push_back(std::make_unique<Stranger>());
  // Connections are accepted in order and junk is refused only once accepted: when the
  // probe is refused, the early ones are handshaking.
  {
    Stranger probe;
    ASSERT_TRUE(probe.connect(ep->port()));
    ASSERT_TRUE(probe.send("junk"));
    ASSERT_TRUE(probe.closed_within(seconds(10)));
  }
  {
    DescriptorsExhausted exhausted;
    for (auto& s : late) ASSERT_TRUE(s->connect(ep->port()));
    // Each late connection takes the place of an early one.
    for (auto& s : early) EXPECT_TRUE(s->closed_within(seconds(10)));
  }
  for (auto& s : late) EXPECT_FALSE(s->closed_within(milliseconds(50))) << logs.dump();
  EXPECT_TRUE(logs.contains("out of file descriptors", "closing the oldest unfinished handshake"))
      << logs.dump();
}

TEST(TcpEndpointLimits, OutOfDescriptorsWithNothingToCloseTheAcceptLoopBacksOff) {
  LogCapture logs;
  auto ep = listen(logs, 256);
  std::vector<std::unique_ptr<Stranger>> waiting;
  for (int i = 0; i < 16; ++i) waiting.push_back(std::make_unique<Stranger>());
  double cpu = 0;
  {
    DescriptorsExhausted exhausted;
    for (auto& s : waiting) ASSERT_TRUE(s->connect(ep->port()));
    const double before = cpu_seconds_of_process();
    // A measurement window (the loop would spin through it): a wait with a deadline on
    // a connection nobody answers.
    EXPECT_FALSE(waiting[0]->closed_within(milliseconds(1500)));
    cpu = cpu_seconds_of_process() - before;
  }
  EXPECT_LT(cpu, 0.3) << "the accept loop spun on EMFILE";
  EXPECT_TRUE(logs.contains("cannot accept connections", "retrying in")) << logs.dump();
  EXPECT_LE(count_lines(logs, "cannot accept connections"), 6) << logs.dump();
  // With descriptors back, the connections that waited in the backlog are served: junk
  // on one of them is refused within the back-off's longest step.
  ASSERT_TRUE(waiting[0]->send("junk"));
  EXPECT_TRUE(waiting[0]->closed_within(seconds(5)));
}

}  // namespace
}  // namespace tributary::testing
