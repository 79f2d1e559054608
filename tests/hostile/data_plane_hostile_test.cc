// The attacks on the data plane from issue 12, against real `tributary agent --workload
// soak` processes: connections to an agent's data port that never say a word, at the
// descriptor limit the run had, floods of junk, and a bit flipped on the path
// between two agents. (Unsolicited frames need a peer inside the group:
// tests/agent/tcp_link_integrity_test.cc runs them between real endpoints.) Each scenario
// ends with the agents committing bitwise-identical, correct steps, the attacked agent not
// burning CPU, and its log a few lines longer, not thousands.
#include <gtest/gtest.h>

#include <regex>

#include "tests/hostile/attackers.h"
#include "tests/hostile/hostile_cluster.h"
#include "tests/hostile/tcp_proxy.h"

namespace tributary::hostile {
namespace {

using fault::SoakCluster;
using integration::deadline_after;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The data port agent `i` logged ("member N rank R data HOST:PORT ...").
int data_port(SoakCluster& cluster, std::size_t i) {
  auto line = cluster.agents[i]->wait_for_line(std::regex("data 127\\.0\\.0\\.1:(\\d+)"),
                                               deadline_after(seconds(60)));
  return line ? std::stoi(line->at(1)) : 0;
}

int refusals(const integration::Process& agent) {
  return fault::count_matches(agent.err(), std::regex("rejected connection from"));
}

// Starts the cluster's processes with a soft limit of `limit` descriptors (they inherit
// it), then gives this process room for its own connections.
void start_with_descriptor_limit(SoakCluster& cluster, int agents, rlim_t limit) {
  rlimit saved{};
  ::getrlimit(RLIMIT_NOFILE, &saved);
  rlimit tight = saved;
  tight.rlim_cur = std::min(limit, saved.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &tight);
  // They train until the test ends: the default 200 steps can be over (shared memory on a
  // quiet machine) before the attack is.
  for (int i = 0; i < agents; ++i) {
    cluster.add_agent({"--soak-steps", "-1", "--soak-duration-ms", "600000"});
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
  raise_fd_limit(8192);
}

TEST(DataPlane, IdleConnectionsAtTheDescriptorLimitNeitherSpinNorStopTraining) {
  SoakCluster cluster(2, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  start_with_descriptor_limit(cluster, 2, 1024);
  const int port = data_port(cluster, 0);
  ASSERT_GT(port, 0) << cluster.dump();
  ASSERT_TRUE(cluster.wait_steps(fault::except(cluster.agents, {}), 2, deadline_after(seconds(60))))
      << cluster.dump();
  const pid_t attacked = cluster.agents[0]->pid();
  const pid_t spared = cluster.agents[1]->pid();
  const double attacked_before = process_cpu_seconds(attacked);
  const double spared_before = process_cpu_seconds(spared);
  const auto t0 = std::chrono::steady_clock::now();
  // 1,100 connections that never send a byte (the agent's limit is 1,024 descriptors).
  std::vector<RawSocket> idle;
  for (int i = 0; i < 1100; ++i) idle.emplace_back(port, milliseconds(7000));
  expect_progress(cluster, 5);
  // All of them are closed: the oldest evicted by newer ones (256 may be unfinished at
  // once), the rest at the 5 s handshake deadline.
  int closed = 0;
  for (auto& s : idle) closed += s.closed_by_peer();
  EXPECT_EQ(closed, 1100) << "idle connections held past the handshake deadline";
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double attacked_cpu = process_cpu_seconds(attacked) - attacked_before;
  const double spared_cpu = process_cpu_seconds(spared) - spared_before;
  // A spinning accept loop burns a core for the whole window; the agents otherwise do
  // the same work.
  EXPECT_LT(attacked_cpu, spared_cpu + 0.25 * wall)
      << "attacked agent: " << attacked_cpu << " CPU-s, the other: " << spared_cpu << " CPU-s in "
      << wall << " s";
  EXPECT_LT(refusals(*cluster.agents[0]), 40) << "a log line per idle connection";
  EXPECT_FALSE(cluster.agents[0]->poll().has_value()) << cluster.dump();
}

TEST(DataPlane, AFloodOfJunkIsAFewLogLines) {
  SoakCluster cluster(2, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  start_agents(cluster, 2);
  const int port = data_port(cluster, 0);
  ASSERT_GT(port, 0) << cluster.dump();
  // 1,500 connections that each send junk, and as many with the right magic and a
  // malformed hello.
  std::string bad_hello(64, '\x7f');
  bad_hello.replace(0, 4, "TRBH");
  for (int i = 0; i < 1500; ++i) {
    RawSocket junk(port, milliseconds(2000));
    junk.send_all("GET / HTTP/1.0\r\n\r\n");
    RawSocket malformed(port, milliseconds(2000));
    malformed.send_all(bad_hello);
  }
  expect_progress(cluster, 3);
  const int lines = refusals(*cluster.agents[0]);
  EXPECT_GT(lines, 0);
  EXPECT_LT(lines, 40) << "every refused connection got a log line of its own";
}

// The silent wrong sum: one bit flipped in a data frame on its way from rank 0 to
// rank 1. The second agent listens on 127.0.0.1:P and advertises 127.0.0.2:P, where a
// proxy forwards to it and flips a bit of the first connection, 1,000 bytes into the
// first frame's payload. The receiver must refuse the frame, and the step must be re-run
// and committed with the same, right sum on both members. Both use TCP (on one host the
// default is shared memory, which no proxy sits on).
TEST(DataPlane, ABitFlippedOnTheWireIsCaughtAndTheStepReRun) {
  SoakCluster cluster(2, kCoordinatorFlags);
  ASSERT_FALSE(cluster.endpoint.empty());
  TcpProxy proxy(0, "127.0.0.2");
  proxy.corrupt_at(2 * 64 + 48 + 1000);       // two handshake messages, a header, into the payload
  cluster.add_agent({"--transport", "tcp"});  // joins first: rank 0, the one that dials
  ASSERT_TRUE(cluster.coordinator->process->wait_for_line(std::regex("member \\d+ joined from"),
                                                          deadline_after(seconds(30))))
      << cluster.dump();
  cluster.agents.push_back(std::make_unique<integration::Process>(
      cluster.dir, "behind-proxy",
      std::vector<std::string>{
          integration::tributary_bin(), "agent", "--coordinator", cluster.endpoint, "--secret",
          cluster.secret, "--data-port", std::to_string(proxy.port()), "--bind-host", "127.0.0.1",
          "--advertise-host", "127.0.0.2", "--transport", "tcp", "--workload", "soak"}));
  expect_progress(cluster, 10);
  EXPECT_TRUE(proxy.corrupted()) << "no traffic went through the proxy\n" << cluster.dump();
  const std::string behind = cluster.agents[1]->err();
  // The flipped bit lands in a payload or, where the frames before it are small (the link
  // probe's, or the failover link's descriptors), in a frame header: both are checked.
  EXPECT_TRUE(std::regex_search(behind, std::regex("from rank 0 at [0-9.:]+( to rank 1 .*|: frame "
                                                   "header )fails its CRC-32C check")))
      << cluster.dump();
}

}  // namespace
}  // namespace tributary::hostile
