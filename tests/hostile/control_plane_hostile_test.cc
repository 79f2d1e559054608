// The attacks on the control plane from issue 12, against real processes: a coordinator
// and `tributary agent --workload soak` members, attacked over raw sockets. Each scenario
// ends with the coordinator alive, its memory bounded, the honest members committing
// bitwise-identical steps (tests/fault/soak_cluster.h checks every step line), and nobody
// without the secret in the membership.
#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <thread>
#include <zmq.hpp>

#include "tests/hostile/attackers.h"
#include "tests/hostile/hostile_cluster.h"
#include "tests/hostile/rogue_member.h"
#include "tests/hostile/tcp_proxy.h"

namespace tributary::hostile {
namespace {

using fault::SoakCluster;
using integration::deadline_after;
using integration::poll_until;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ControlPlane, ClaimedRoutingIdsCannotCrashTheCoordinator) {
  SoakCluster cluster(2, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  const int port = coordinator_port(cluster);
  // Without the secret: claim the id libzmq would give the next anonymous peer, then
  // connect anonymously. libzmq used to abort on that collision (socket_base.cpp:2130).
  RawSocket claimer(port);
  ASSERT_TRUE(claimer.connected());
  EXPECT_FALSE(zmtp::handshake(claimer, first_unseeded_routing_id()))
      << "a peer without the secret completed the ZeroMQ handshake";
  RawSocket plain(port);
  EXPECT_FALSE(zmtp::handshake(plain, ""));
  // With the secret: the same pair over CURVE. The id it claims is no longer the next one
  // (the coordinator seeds the counter), so nothing collides.
  RogueMember insider_claimer(cluster.endpoint, cluster.secret, "claimer",
                              first_unseeded_routing_id());
  RogueMember insider_plain(cluster.endpoint, cluster.secret, "plain");
  EXPECT_TRUE(insider_claimer.join(insider_claimer.request()).has_value());
  EXPECT_TRUE(insider_plain.join(insider_plain.request()).has_value());
  insider_claimer.stop();
  insider_plain.stop();
  start_agents(cluster, 2);
  expect_progress(cluster, 5);
}

TEST(ControlPlane, AnUnfinishedMultipartFloodKeepsMemoryBounded) {
  SoakCluster cluster(2, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  start_agents(cluster, 2);
  ASSERT_TRUE(cluster.wait_steps(fault::except(cluster.agents, {}), 2, deadline_after(seconds(60))))
      << cluster.dump();
  const pid_t pid = cluster.coordinator->process->pid();
  const long before = rss_kib(pid);
  // 256 KiB frames that all say "more follows", 1 GiB in all (or 5 s): the message never
  // ends. libzmq keeps an unfinished message whole; only peers that passed the CURVE
  // handshake get to send one.
  const std::string chunk = zmtp::frame(std::string(256 << 10, 'x'), /*more=*/true);
  std::atomic<long> peak{before};
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done) {
      peak = std::max(peak.load(), rss_kib(pid));
      std::this_thread::sleep_for(milliseconds(20));  // sampling period, not a wait
    }
  });
  long sent = 0;
  int admitted = 0;
  const auto until = std::chrono::steady_clock::now() + seconds(5);
  while (sent < (1L << 30) && std::chrono::steady_clock::now() < until) {
    RawSocket s(coordinator_port(cluster), milliseconds(1000));
    if (!s.connected()) continue;
    // Refused without the secret: the flood hits a closed door.
    if (zmtp::handshake(s, "")) ++admitted;
    while (sent < (1L << 30) && s.send_all(chunk)) sent += static_cast<long>(chunk.size());
  }
  done = true;
  watch.join();
  EXPECT_EQ(admitted, 0) << "a peer without the secret completed the ZeroMQ handshake";
  EXPECT_LT(peak - before, 64 * 1024) << "coordinator RSS grew from " << before << " KiB to "
                                      << peak << " KiB while " << (sent >> 20) << " MiB were sent";
  expect_progress(cluster, 5);
}

TEST(ControlPlane, PendingJoinsWithoutTheSecretDoNotStarveAMemberWithIt) {
  raise_fd_limit(8192);
  SoakCluster cluster(2, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  // 1,100 connections that each try to send a JoinRequest and never a proof (they used to
  // hold all 1,024 join slots). The JoinRequest would follow the ZeroMQ handshake, which a
  // peer without the secret cannot finish, so none of them reaches the JoinGate.
  control::Envelope join;
  auto* r = join.mutable_join_request();
  r->set_protocol_version(control::kProtocolVersion);
  r->set_name("squatter");
  r->set_host("h");
  r->set_data_address("127.0.0.1:9");
  const std::string request = zmtp::frame(control::encode_envelope(join), false);
  std::vector<RawSocket> squatters;
  int admitted = 0;
  for (int i = 0; i < 1100; ++i) {
    squatters.emplace_back(coordinator_port(cluster), milliseconds(4000));
    if (zmtp::handshake(squatters.back(), "")) {
      ++admitted;
      squatters.back().send_all(request);
    }
  }
  EXPECT_EQ(admitted, 0) << "peers without the secret completed the ZeroMQ handshake";
  start_agents(cluster, 2);
  expect_progress(cluster, 5);
  int closed = 0;
  for (int i = 0; i < 50; ++i) closed += squatters[static_cast<std::size_t>(i)].closed_by_peer();
  EXPECT_EQ(closed, 50) << "connections without the secret are dropped";
}

TEST(ControlPlane, IdleConnectionsAreClosedWithinTheHandshakeDeadline) {
  SoakCluster cluster(1, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  std::vector<RawSocket> idle;
  for (int i = 0; i < 200; ++i) idle.emplace_back(coordinator_port(cluster), milliseconds(3500));
  const auto t0 = std::chrono::steady_clock::now();
  int closed = 0;
  for (auto& s : idle) closed += s.closed_by_peer();
  EXPECT_EQ(closed, 200) << "idle connections were held past 3.5 s (the deadline is 2 s)";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(4));
}

TEST(ControlPlane, SlowAndIdleScrapersDoNotBlockTheMetricsEndpoint) {
  SoakCluster cluster(1, {"--no-straggler-eviction", "--metrics", "127.0.0.1:0"});
  ASSERT_FALSE(cluster.endpoint.empty());
  auto line = cluster.coordinator->process->wait_for_line(std::regex("metrics on port (\\d+)"),
                                                          deadline_after(seconds(10)));
  ASSERT_TRUE(line) << cluster.dump();
  const int port = std::stoi(line->at(1));
  std::vector<RawSocket> hold;
  for (int i = 0; i < 2; ++i) {
    hold.emplace_back(port);
    hold.back().send_all("GE");  // a request that never finishes
  }
  for (int i = 0; i < 300; ++i) hold.emplace_back(port);
  for (int round = 0; round < 3; ++round) {
    const std::string reply = scrape(port, milliseconds(2000));
    EXPECT_NE(reply.find("tributary_membership_size"), std::string::npos)
        << "round " << round << ": no answer within 2 s";
  }
}

TEST(ControlPlane, LogLinesFromTheNetworkCannotForgeOrFloodTheLog) {
  SoakCluster cluster(2, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  const std::string forged =
      "2026-01-01T00:00:00.000Z info tributary[coordinator]: member 99 joined";
  RogueMember forger(cluster.endpoint, cluster.secret, "w\n" + forged);
  control::Envelope answer;
  EXPECT_FALSE(forger.join(forger.request(), &answer).has_value());
  EXPECT_TRUE(answer.has_join_rejected() &&
              answer.join_rejected().kind() == control::JoinRejected::INVALID_REQUEST)
      << answer.DebugString();
  // 1,500 connections that fail the handshake in one burst.
  for (int i = 0; i < 1500; ++i) {
    RawSocket s(coordinator_port(cluster), milliseconds(2000));
    if (zmtp::handshake(s, "")) s.send_all(zmtp::frame("junk", false));
  }
  start_agents(cluster, 2);
  expect_progress(cluster, 3);
  const std::string log = cluster.coordinator_log();
  EXPECT_EQ(log.find("\n" + forged), std::string::npos) << "a forged line in the log";
  const int refusals = fault::count_matches(log, std::regex("refused a connection"));
  EXPECT_GT(refusals, 0);
  EXPECT_LT(refusals, 40) << "every refused connection got a log line of its own";
}

TEST(ControlPlane, ALeaveInjectedOnThePathRemovesNobody) {
  SoakCluster cluster(3, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  TcpProxy proxy(coordinator_port(cluster));
  start_agents(cluster, 2);
  // The victim reaches the coordinator through the proxy.
  cluster.agents.push_back(std::make_unique<integration::Process>(
      cluster.dir, "victim",
      integration::agent_argv("tcp://127.0.0.1:" + std::to_string(proxy.port()), cluster.secret,
                              {"--workload", "soak"})));
  integration::Process& victim = *cluster.agents.back();
  ASSERT_TRUE(cluster.wait_steps(fault::except(cluster.agents, {}), 3, deadline_after(seconds(60))))
      << cluster.dump();
  const std::uint64_t id = fault::current_member(victim);
  ASSERT_NE(id, 0u) << cluster.dump();
  // Leave{member id} in ZeroMQ's framing, written into the victim's connection.
  control::Envelope leave;
  leave.mutable_leave()->set_member_id(id);
  proxy.inject(zmtp::frame(control::encode_envelope(leave), false));
  ASSERT_TRUE(poll_until(deadline_after(seconds(10)), [&] { return proxy.injected(); }));
  expect_progress(cluster, 5);
  const std::string log = cluster.coordinator_log();
  EXPECT_FALSE(
      std::regex_search(log, std::regex("member " + std::to_string(id) + " \\('[^']*'\\) left")))
      << cluster.dump();
  EXPECT_EQ(fault::parse_report(victim.out()).members.size(), 1u)
      << "the victim had to join again\n"
      << cluster.dump();
}

TEST(ControlPlane, AMemberWithTheSecretCannotEndTheClusterWithAnImpossibleReady) {
  // Members give up on connecting a group after 3 s (the liar never answers).
  SoakCluster cluster(3, {"--no-straggler-eviction", "--heartbeat-timeout-ms", "500"},
                      {"--join-timeout-ms", "3000"});
  ASSERT_FALSE(cluster.endpoint.empty());
  start_agents(cluster, 3);
  ASSERT_TRUE(cluster.wait_steps(fault::except(cluster.agents, {}), 2, deadline_after(seconds(60))))
      << cluster.dump();
  // It joins at a step boundary, fails everyone's connection to it (nothing listens at its
  // data address), and once it is in a started view claims to have committed 2^64 - 1.
  RogueMember liar(cluster.endpoint, cluster.secret, "liar");
  ASSERT_TRUE(liar.join(liar.request()).has_value());
  liar.run(~std::uint64_t{0});
  ASSERT_TRUE(poll_until(deadline_after(seconds(30)), [&] { return liar.evicted(); }))
      << "the impossible Ready was not refused\n"
      << cluster.dump();
  EXPECT_GT(liar.lies_told(), 0);
  liar.stop();
  expect_progress(cluster, 5);
  for (const auto& a : cluster.agents)
    EXPECT_FALSE(a->poll().has_value()) << a->name() << " exited";
}

}  // namespace
}  // namespace tributary::hostile
