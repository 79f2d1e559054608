// Several data addresses per member (--data-address, repeated, most preferred first):
// real agent processes on loopback where the preferred address refuses connections, or
// accepts them and never answers (as a path that drops packets would), reach each other
// on the next address and run every collective correctly; when no address connects, the
// agents fail with an error that names each address and why it failed.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

constexpr int kAgents = 2;

// A TCP listener that never accepts: connections complete in the kernel's backlog and
// then hear nothing, like a path whose packets vanish after the handshake.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::listen(fd_, 16) == 0 && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~SilentListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

struct AgentsRun {
  std::vector<int> codes;
  std::string err;   // every agent's stderr
  std::string dump;  // everything, for failure messages
};

AgentsRun run_agents(const std::vector<std::string>& extra, std::chrono::seconds bound) {
  TempDir dir;
  const std::string secret = "multipath-secret";
  CoordinatorProcess coordinator(dir, "coordinator", secret, kAgents);
  AgentsRun run;
  if (coordinator.wait_ready(deadline_after(seconds(30))).empty()) {
    run.dump = coordinator.process->dump();
    return run;
  }
  std::vector<std::string> args = {"--workload", "check", "--transport", "tcp"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < kAgents; ++i) {
    agents.push_back(std::make_unique<Process>(dir, "agent" + std::to_string(i),
                                               agent_argv(coordinator.endpoint(), secret, args)));
  }
  const auto deadline = deadline_after(bound);
  for (auto& a : agents) {
    const auto code = a->wait_until(deadline);
    run.codes.push_back(code.value_or(-1));
    run.err += a->err();
    run.dump += a->dump();
  }
  run.dump += coordinator.process->dump();
  return run;
}

TEST(Multipath, RefusedPreferredAddressFallsToTheNextOne) {
  const AgentsRun run =
      run_agents({"--data-address", "127.0.0.1:1", "--data-address", "127.0.0.1"}, seconds(120));
  ASSERT_EQ(run.codes, std::vector<int>(kAgents, 0)) << run.dump;
  EXPECT_NE(run.err.find("after its preferred address(es) failed: 127.0.0.1:1: cannot connect"),
            std::string::npos)
      << run.dump;
  EXPECT_NE(run.err.find(") over tcp"), std::string::npos) << run.dump;
}

TEST(Multipath, SilentPreferredAddressGivesWayAfterTheAttemptDeadline) {
  SilentListener silent;
  ASSERT_GT(silent.port(), 0);
  const std::string preferred = "127.0.0.1:" + std::to_string(silent.port());
  const AgentsRun run = run_agents(
      {"--data-address", preferred, "--data-address", "127.0.0.1", "--connect-attempt-ms", "300"},
      seconds(120));
  ASSERT_EQ(run.codes, std::vector<int>(kAgents, 0)) << run.dump;
  EXPECT_NE(run.err.find(preferred + ": no authenticated connection within 300 ms"),
            std::string::npos)
      << run.dump;
}

TEST(Multipath, NoAddressConnectsIsAClearError) {
  // A job that needs both members (--min-world-size 2): whichever agent's connect deadline
  // passes first reports and exits, the coordinator removes it, and the other must not
  // carry on alone in that view; its connect of the first view, cancelled by the new one,
  // still says what it lacked.
  const AgentsRun run = run_agents(
      {"--data-address", "127.0.0.1:1", "--join-timeout-ms", "3000", "--min-world-size", "2"},
      seconds(60));
  ASSERT_EQ(run.codes.size(), static_cast<std::size_t>(kAgents)) << run.dump;
  for (int code : run.codes) {
    EXPECT_NE(code, 0) << run.dump;
    EXPECT_NE(code, -1) << "an agent hangs\n" << run.dump;
  }
  EXPECT_NE(run.err.find("connecting the last one failed"), std::string::npos) << run.dump;
  EXPECT_NE(run.err.find("127.0.0.1:1: cannot connect: Connection refused"), std::string::npos)
      << run.dump;
}

}  // namespace
}  // namespace tributary::integration
