// Hostile and mistaken peers against real processes: an agent with the wrong cluster
// secret, raw garbage and wrong-secret handshakes on agents' data ports, and garbage
// (raw TCP and ZeroMQ) on the coordinator's port. In every case the bad connection is
// dropped and named in the log, and everybody else carries on: the check workload still
// completes with every result correct.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <regex>
#include <string_view>
#include <thread>
#include <zmq.hpp>

#include "transport/tcp/frame.h"
#include "core/auth.h"
#include "tests/integration/process.h"
#include "tests/support/curve_socket.h"

namespace tributary::integration {
namespace {

constexpr std::string_view kSecret = "integration-secret";

// ---- raw sockets with bounded waits --------------------------------------------------

class Socket {
 public:
  // Connects to 127.0.0.1:port; every later read and write gives up after `io_timeout`.
  explicit Socket(int port, milliseconds io_timeout = milliseconds(10000)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{};
    tv.tv_sec = io_timeout.count() / 1000;
    tv.tv_usec = (io_timeout.count() % 1000) * 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool connected() const { return connected_; }

  bool send_all(const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }
  bool send_all(std::string_view s) { return send_all(s.data(), s.size()); }

  // Exactly n bytes, or nullopt on EOF, error or timeout.
  std::optional<std::string> recv_exact(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      const ssize_t k = ::recv(fd_, out.data() + got, n - got, 0);
      if (k <= 0) return std::nullopt;
      got += static_cast<std::size_t>(k);
    }
    return out;
  }

  // True once the peer has closed the connection (EOF or reset), false if it was still
  // open when the read timeout expired. Discards whatever it reads.
  bool closed_by_peer() {
    char buf[512];
    for (;;) {
      const ssize_t k = ::recv(fd_, buf, sizeof(buf), 0);
      if (k == 0) return true;
      if (k < 0) return errno == ECONNRESET || errno == EPIPE;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::vector<std::vector<std::string>> all_matches(const std::string& text, const std::regex& re) {
  std::vector<std::vector<std::string>> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    std::vector<std::string> groups;
    for (const auto& g : *it) groups.push_back(g.str());
    out.push_back(std::move(groups));
  }
  return out;
}

// Polls `p`'s stderr until `re` matched at least `n` times.
std::vector<std::vector<std::string>> wait_for_matches(Process& p, const std::regex& re,
                                                       std::size_t n, SteadyTime deadline) {
  std::vector<std::vector<std::string>> found;
  poll_until(deadline, [&] {
    found = all_matches(p.err(), re);
    return found.size() >= n || p.poll().has_value();
  });
  return found;
}

// ---- data-plane attacks ---------------------------------------------------------------

const char kJunk[] =
    "GET /metrics HTTP/1.1\r\nHost: tributary\r\n\r\n\x01\x02\x03 not a handshake at all";

// Connects, says the right magic and version in a hello, and answers the challenge with a
// MAC made from the wrong secret. Returns the acceptor's answer (a REJECT is expected),
// nullopt if the connection closed first.
std::optional<transport::HandshakeMessage> wrong_secret_handshake(int port, std::uint64_t epoch,
                                                              std::uint32_t from, std::uint32_t to,
                                                              std::uint32_t size) {
  Socket s(port);
  if (!s.connected()) return std::nullopt;
  transport::HandshakeMessage hello;
  hello.type = transport::HandshakeType::kHello;
  hello.epoch = epoch;
  hello.from_rank = from;
  hello.to_rank = to;
  hello.group_size = size;
  hello.nonce = random_nonce();
  const auto hello_bytes = transport::encode_handshake(hello);
  if (!s.send_all(hello_bytes.data(), hello_bytes.size())) return std::nullopt;
  auto raw = s.recv_exact(transport::kHandshakeBytes);
  if (!raw) return std::nullopt;
  transport::HandshakeBytes bytes;
  std::memcpy(bytes.data(), raw->data(), bytes.size());
  auto challenge = transport::decode_handshake(bytes);
  if (!challenge.is_ok() || challenge->type != transport::HandshakeType::kChallenge)
    return std::nullopt;
  transport::HandshakeMessage response;
  response.type = transport::HandshakeType::kResponse;
  response.mac = transport::handshake_mac("not-the-cluster-secret", transport::HandshakeRole::kConnector,
                                      hello, challenge->nonce);
  const auto response_bytes = transport::encode_handshake(response);
  if (!s.send_all(response_bytes.data(), response_bytes.size())) return std::nullopt;
  raw = s.recv_exact(transport::kHandshakeBytes);
  if (!raw) return std::nullopt;
  std::memcpy(bytes.data(), raw->data(), bytes.size());
  auto answer = transport::decode_handshake(bytes);
  if (!answer.is_ok()) return std::nullopt;
  return *answer;
}

// Keeps hitting `ports` with junk and wrong-secret handshakes until stopped; paced so it
// does not starve the cluster of this small machine's CPUs.
class DataPlaneHeckler {
 public:
  explicit DataPlaneHeckler(std::vector<int> ports) : ports_(std::move(ports)) {
    thread_ = std::thread([this] {
      std::uint32_t round = 0;
      while (!stop_) {
        for (int port : ports_) {
          if (round % 2 == 0) {
            Socket s(port, milliseconds(2000));
            if (s.connected()) s.send_all(kJunk, sizeof(kJunk));
          } else {
            (void)wrong_secret_handshake(port, 1, round % 3, 1 + round % 2, 3);
          }
          ++attempts_;
        }
        ++round;
        std::this_thread::sleep_for(milliseconds(5));  // pacing, not a wait for an event
      }
    });
  }
  ~DataPlaneHeckler() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int attempts() const { return attempts_; }

 private:
  std::vector<int> ports_;
  std::atomic<bool> stop_{false};
  std::atomic<int> attempts_{0};
  std::thread thread_;
};

// ---- control-plane attacks ------------------------------------------------------------

// Keeps sending garbage to the coordinator until stopped: raw TCP junk (not ZMTP), plain
// ZeroMQ DEALERs (no CURVE: refused in the handshake), and DEALERs holding the cluster's
// keys (a member gone bad) that send junk frames, multi-frame junk and an oversized
// message.
class ControlPlaneHeckler {
 public:
  explicit ControlPlaneHeckler(std::string endpoint, int port)
      : endpoint_(std::move(endpoint)), port_(port) {
    raw_ = std::thread([this] {
      while (!stop_) {
        Socket s(port_, milliseconds(2000));
        if (s.connected()) s.send_all(kJunk, sizeof(kJunk));
        ++raw_attempts_;
        std::this_thread::sleep_for(milliseconds(10));  // pacing
      }
    });
    zmq_ = std::thread([this] {
      zmq::context_t ctx(1);
      std::uint32_t round = 0;
      while (!stop_) {
        zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
        dealer.set(zmq::sockopt::linger, 500);
        if (round % 4 != 3) testing::use_cluster_client_keys(dealer, kSecret);
        dealer.connect(endpoint_);
        const std::string junk = "junk " + std::to_string(round) + " \xff\xfe\x00\x01";
        switch (round % 4) {
          case 0: dealer.send(zmq::buffer(junk), zmq::send_flags::dontwait); break;
          case 1:
            dealer.send(zmq::buffer(junk), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
            dealer.send(zmq::buffer(junk), zmq::send_flags::dontwait);
            break;
          default: {
            const std::string big(2 << 20, '\x5a');  // over the coordinator's 1 MiB limit
            dealer.send(zmq::buffer(big), zmq::send_flags::dontwait);
          }
        }
        ++zmq_attempts_;
        ++round;
        dealer.close();                                 // lingers (bounded) so the junk goes out
        std::this_thread::sleep_for(milliseconds(10));  // pacing
      }
    });
  }
  ~ControlPlaneHeckler() { stop(); }
  void stop() {
    stop_ = true;
    if (raw_.joinable()) raw_.join();
    if (zmq_.joinable()) zmq_.join();
  }
  int raw_attempts() const { return raw_attempts_; }
  int zmq_attempts() const { return zmq_attempts_; }

 private:
  std::string endpoint_;
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> raw_attempts_{0};
  std::atomic<int> zmq_attempts_{0};
  std::thread raw_;
  std::thread zmq_;
};

// ---- helpers --------------------------------------------------------------------------

std::string all_dumps(const std::vector<std::unique_ptr<Process>>& ps) {
  std::string s;
  for (const auto& p : ps) s += p->dump();
  return s;
}

// Waits for every agent; each must exit 0, and rank 0 must report the check's summary.
void expect_check_passes(std::vector<std::unique_ptr<Process>>& agents, Process& coordinator,
                         SteadyTime deadline) {
  for (auto& a : agents) {
    const auto code = a->wait_until(deadline);
    ASSERT_TRUE(code.has_value()) << a->name() << " did not finish\n"
                                  << all_dumps(agents) << coordinator.dump();
    EXPECT_EQ(*code, 0) << a->name() << "\n" << all_dumps(agents) << coordinator.dump();
  }
  const std::regex summary("check: \\d+ collective cases correct on " +
                           std::to_string(agents.size()) + " ranks");
  int summaries = 0;
  for (auto& a : agents) summaries += std::regex_search(a->out(), summary) ? 1 : 0;
  EXPECT_EQ(summaries, 1) << all_dumps(agents);
}

std::unique_ptr<Process> start_agent(const TempDir& dir, const std::string& name,
                                     const std::string& endpoint, std::string_view secret,
                                     const std::vector<std::string>& extra = {"--workload",
                                                                              "check"}) {
  return std::make_unique<Process>(dir, name, agent_argv(endpoint, std::string(secret), extra));
}

// ---- tests ----------------------------------------------------------------------------

TEST(WrongSecret, AgentIsRejectedWithAClearMessageOnBothSidesAndTheClusterStillForms) {
  TempDir dir;
  CoordinatorProcess coordinator(dir, "coordinator", std::string(kSecret), 2);
  ASSERT_FALSE(coordinator.wait_ready(deadline_after(seconds(30))).empty())
      << coordinator.process->dump();

  auto intruder = start_agent(dir, "intruder", coordinator.endpoint(), "some-other-secret");
  const auto code = intruder->wait_until(deadline_after(seconds(60)));
  ASSERT_TRUE(code.has_value()) << intruder->dump();
  EXPECT_NE(*code, 0) << intruder->dump();
  EXPECT_TRUE(std::regex_search(intruder->err(), std::regex("wrong cluster secret")))
      << intruder->dump();

  // The coordinator names the peer's address; nothing the intruder sent reached its logic.
  const std::regex rejected(
      "refused a connection from 127\\.0\\.0\\.1:\\d+: its CURVE handshake does not use the "
      "cluster's keys \\(a wrong cluster secret\\)");
  EXPECT_TRUE(coordinator.process->wait_for_line(rejected, deadline_after(seconds(30))))
      << coordinator.process->dump();

  // The rightful members form the cluster and run every collective.
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(
        start_agent(dir, "agent" + std::to_string(i), coordinator.endpoint(), kSecret));
  }
  expect_check_passes(agents, *coordinator.process, deadline_after(seconds(120)));
  EXPECT_FALSE(coordinator.process->poll().has_value()) << coordinator.process->dump();
}

TEST(DataPort, GarbageAndWrongSecretHandshakesDropOnlyThatConnection) {
  TempDir dir;
  CoordinatorProcess coordinator(dir, "coordinator", std::string(kSecret), 3);
  ASSERT_FALSE(coordinator.wait_ready(deadline_after(seconds(30))).empty())
      << coordinator.process->dump();

  // Two members join and wait for the third; the coordinator logs their data addresses.
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(
        start_agent(dir, "agent" + std::to_string(i), coordinator.endpoint(), kSecret));
  }
  const std::regex joined("member \\d+ joined from \\S+: .*, data 127\\.0\\.0\\.1:(\\d+)");
  const auto joins = wait_for_matches(*coordinator.process, joined, 2, deadline_after(seconds(60)));
  ASSERT_EQ(joins.size(), 2u) << coordinator.process->dump() << all_dumps(agents);
  std::vector<int> ports;
  for (const auto& j : joins) ports.push_back(std::stoi(j[1]));

  // While they wait: junk, a bad handshake after the right magic, and a wrong secret.
  for (std::size_t i = 0; i < ports.size(); ++i) {
    {
      Socket s(ports[i]);
      ASSERT_TRUE(s.connected());
      ASSERT_TRUE(s.send_all(kJunk, sizeof(kJunk)));
      EXPECT_TRUE(s.closed_by_peer()) << "agent" << i << " kept a junk connection open";
    }
    {
      Socket s(ports[i]);
      ASSERT_TRUE(s.connected());
      std::string bad(transport::kHandshakeBytes, '\x7f');
      const auto magic = transport::encode_handshake(transport::HandshakeMessage{});
      std::memcpy(bad.data(), magic.data(), 4);  // the right magic, then nonsense
      ASSERT_TRUE(s.send_all(bad));
      EXPECT_TRUE(s.closed_by_peer()) << "agent" << i << " kept a bad handshake open";
    }
    const auto answer = wrong_secret_handshake(ports[i], 1, 0, 1, 3);
    ASSERT_TRUE(answer.has_value())
        << "agent" << i << " sent no answer to a wrong-secret handshake";
    EXPECT_EQ(answer->type, transport::HandshakeType::kReject);
    EXPECT_EQ(answer->reason, transport::RejectReason::kAuth);
  }
  // Each agent logs every refusal with the peer's address.
  for (std::size_t i = 0; i < agents.size(); ++i) {
    auto& a = *agents[i];
    EXPECT_TRUE(a.wait_for_line(
        std::regex("rejected connection from 127\\.0\\.0\\.1:\\d+: not a tributary handshake"),
        deadline_after(seconds(30))))
        << a.dump();
    EXPECT_TRUE(a.wait_for_line(std::regex("rejected connection from 127\\.0\\.0\\.1:\\d+: .*"
                                           "failed the cluster-secret challenge"),
                                deadline_after(seconds(30))))
        << a.dump();
    EXPECT_FALSE(a.poll().has_value()) << "agent" << i << " exited\n" << a.dump();
  }

  // The third member arrives; the heckling goes on while the cluster connects and runs
  // every collective, and nobody notices.
  DataPlaneHeckler heckler(ports);
  agents.push_back(start_agent(dir, "agent2", coordinator.endpoint(), kSecret));
  expect_check_passes(agents, *coordinator.process, deadline_after(seconds(180)));
  heckler.stop();
  EXPECT_GT(heckler.attempts(), 0);
}

TEST(CoordinatorPort, GarbageWhileAClusterRunsDropsOnlyThoseConnections) {
  TempDir dir;
  CoordinatorProcess coordinator(dir, "coordinator", std::string(kSecret), 3);
  ASSERT_FALSE(coordinator.wait_ready(deadline_after(seconds(30))).empty())
      << coordinator.process->dump();
  Process& c = *coordinator.process;

  ControlPlaneHeckler heckler(coordinator.endpoint(), coordinator.port());
  // Both kinds of garbage are seen and dropped before the members arrive...
  EXPECT_TRUE(c.wait_for_line(std::regex("dropped malformed message from \\S+"),
                              deadline_after(seconds(60))))
      << c.dump();
  EXPECT_TRUE(c.wait_for_line(std::regex("refused a connection from 127\\.0\\.0\\.1:\\d+: it "
                                         "(does not speak CURVE|closed or stalled)"),
                              deadline_after(seconds(60))))
      << c.dump();
  // ...and keep coming while the cluster forms and runs every collective.
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(
        start_agent(dir, "agent" + std::to_string(i), coordinator.endpoint(), kSecret));
  }
  expect_check_passes(agents, c, deadline_after(seconds(180)));
  heckler.stop();
  EXPECT_GT(heckler.raw_attempts(), 0);
  EXPECT_GT(heckler.zmq_attempts(), 0);
  EXPECT_FALSE(c.poll().has_value()) << "the coordinator exited\n" << c.dump();
  // No member was removed for anything the garbage did.
  EXPECT_EQ(c.err().find("removed member"), std::string::npos) << c.dump();
}

}  // namespace
}  // namespace tributary::integration
