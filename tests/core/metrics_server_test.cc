// The /metrics server against real sockets: it answers scrapes while hundreds of idle and
// slow clients hold connections, closes what stalls, and backs off (rather than spins) when
// it runs out of file descriptors.
#include "core/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "tests/support/descriptors_exhausted.h"
#include "tests/support/raw_socket.h"

namespace tributary {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::RawSocket;

std::string scrape(int port,
                   std::string_view request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n") {
  RawSocket c(port);
  if (!c.connected() || !c.send_all(request)) return {};
  return c.read_all();
}

std::unique_ptr<MetricsServer> serve(MetricsServerOptions options = {}) {
  auto s = MetricsServer::start(
      "127.0.0.1:0", [] { return std::string("up 1\n"); },
      Logger("metrics", [](const LogRecord&) {}), options);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s ? std::move(s).value() : nullptr;
}

TEST(MetricsServer, AnswersScrapesAndRefusesWhatIsNotOne) {
  auto server = serve();
  ASSERT_TRUE(server);
  const std::string ok = scrape(server->port());
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Length: 5\r\n"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\r\n\r\nup 1\n"), std::string::npos) << ok;
  EXPECT_NE(scrape(server->port(), "GET /metrics?x=1 HTTP/1.0\n\n").find("200 OK"),
            std::string::npos);
  EXPECT_NE(scrape(server->port(), "GET / HTTP/1.1\r\n\r\n").find("404"), std::string::npos);
  EXPECT_NE(scrape(server->port(), "POST /metrics HTTP/1.1\r\n\r\n").find("405"),
            std::string::npos);
  EXPECT_NE(scrape(server->port(), "\x16\x03\x01 tls hello\r\n\r\n").find("400"),
            std::string::npos);
  EXPECT_NE(scrape(server->port(), std::string(9000, 'A')).find("431"), std::string::npos);
}

TEST(MetricsServer, BadAddressesAreRefused) {
  Logger quiet("m", [](const LogRecord&) {});
  EXPECT_EQ(MetricsServer::start(
                "no-port", [] { return std::string(); }, quiet)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::start(
                "203.0.113.1:0", [] { return std::string(); }, quiet)
                .status()
                .code(),
            StatusCode::kUnavailable)
      << "an address of no local interface";
}

TEST(MetricsServer, SlowAndIdleClientsDoNotStarveAScrape) {
  MetricsServerOptions options;
  options.max_connections = 64;
  auto server = serve(options);
  ASSERT_TRUE(server);
  // 300 idle connections (more than max_connections) and 2 clients that drip their request
  // a byte at a time: with civetweb's 2 threads, the 2 slow ones alone blocked every scrape.
  std::vector<RawSocket> idle;
  for (int i = 0; i < 300; ++i) idle.emplace_back(server->port());
  std::vector<RawSocket> slow;
  for (int i = 0; i < 2; ++i) {
    slow.emplace_back(server->port());
    slow.back().send_all("GE");
  }
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string reply = scrape(server->port());
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_NE(reply.find("up 1"), std::string::npos) << "round " << round;
    EXPECT_LT(took, milliseconds(500)) << "round " << round;
    for (auto& s : slow) s.send_all("T");
  }
}

TEST(MetricsServer, ConnectionsThatStallAreClosed) {
  MetricsServerOptions options;
  options.request_timeout = milliseconds(200);
  auto server = serve(options);
  ASSERT_TRUE(server);
  RawSocket idle(server->port());
  RawSocket partial(server->port());
  partial.send_all("GET /metr");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle.closed_by_peer());
  EXPECT_TRUE(partial.closed_by_peer());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(2));
}

// CPU seconds this process has used.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

TEST(MetricsServer, OutOfFileDescriptorsBacksOffInsteadOfSpinning) {
  MetricsServerOptions options;
  options.request_timeout = seconds(30);  // the idle ones stay
  auto server = serve(options);
  ASSERT_TRUE(server);
  // Sockets made while descriptors are left; then every descriptor of this process (the
  // server's too: it is this process) in use; then the sockets connect, which takes no
  // descriptor: the kernel completes them into the listen backlog, and the server's
  // accept() fails with EMFILE, with no connection of its own it could close to make room.
  std::vector<int> sockets;
  for (int i = 0; i < 10; ++i) sockets.push_back(::socket(AF_INET, SOCK_STREAM, 0));
  double spent = 0;
  {
    testing::DescriptorsExhausted exhausted;
    ASSERT_TRUE(exhausted.armed());
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int fd : sockets) EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const double before = cpu_seconds();
    // Measuring CPU use over a second of wall time (nothing is waited for here).
    std::this_thread::sleep_for(seconds(1));
    spent = cpu_seconds() - before;
  }
  for (int fd : sockets) ::close(fd);
  EXPECT_LT(spent, 0.25) << "the accept loop spun on EMFILE";
  // Descriptors are back: it serves again.
  EXPECT_NE(scrape(server->port()).find("up 1"), std::string::npos);
}

}  // namespace
}  // namespace tributary
