// The client's ZeroMQ thread survives signals. A training process installs handlers (the
// agent drains on SIGTERM), and the kernel delivers a process-directed signal to any
// thread that does not block it, the client's among them; cppzmq throws on the EINTR
// that interrupts zmq_poll there. This test installs a no-op handler without SA_RESTART,
// sends the signal to every other thread of the process (tgkill) again and again while a
// real client talks to a real coordinator, and checks that the client keeps receiving
// views and acknowledgements.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "control_client/coordinator_client.h"
#include "coordinator/coordinator.h"

namespace tributary::control_client {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "signal secret";

Deadline soon() { return Deadline::after(seconds(10)); }

Logger logger(std::string who) {
  return Logger(who, [who](const LogRecord& r) {
    std::fprintf(stderr, "[%s] %s\n", who.c_str(), format_log_line(r, LogFormat::kText).c_str());
  });
}

std::atomic<int> handled{0};
void count_signal(int) { handled.fetch_add(1); }

// Installs `handler` for `sig` without SA_RESTART (zmq_poll is never restarted anyway);
// restores the previous action on destruction.
class SignalHandler {
 public:
  SignalHandler(int sig, void (*handler)(int)) : sig_(sig) {
    struct sigaction sa = {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    ::sigaction(sig_, &sa, &previous_);
  }
  ~SignalHandler() { ::sigaction(sig_, &previous_, nullptr); }

 private:
  int sig_;
  struct sigaction previous_ = {};
};

// Sends `sig` to every thread of this process but the caller; returns how many.
int signal_other_threads(int sig) {
  const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
  int sent = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    const pid_t tid = static_cast<pid_t>(std::stol(entry.path().filename().string()));
    if (tid == self) continue;
    if (::syscall(SYS_tgkill, ::getpid(), tid, sig) == 0) ++sent;
  }
  return sent;
}

ClientConfig client_config(const std::string& endpoint, const std::string& name) {
  ClientConfig c;
  c.endpoint = endpoint;
  c.secret = kSecret;
  c.host = "h-" + name;
  c.data_address = "127.0.0.1:7000";
  c.name = name;
  return c;
}

TEST(ClientSignals, ClientThreadSurvivesSignalsWhileHeartbeatingAndReceivingViews) {
  coordinator::CoordinatorConfig config;
  config.secret = kSecret;
  config.metrics_address.clear();
  config.initial_world_size = 1;
  config.heartbeat_interval = milliseconds(20);  // the client polls in 20 ms slices
  config.heartbeat_timeout = seconds(5);
  config.straggler.enabled = false;
  coordinator::Coordinator coordinator(config, logger("coordinator"));
  ASSERT_TRUE(coordinator.start().is_ok());

  CoordinatorClient client(logger("client"));
  auto joined = client.join(client_config(coordinator.endpoint(), "steady"), soon());
  ASSERT_TRUE(joined.is_ok()) << joined.status().to_string();
  auto first = client.wait_for_view(1, soon());
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  membership::Epoch epoch = first->epoch;

  SignalHandler handler(SIGUSR1, count_signal);
  int sent = 0;
  // Each round: signal every thread (the client's is almost always inside zmq_poll), then
  // make the coordinator push two views (a member joins at a boundary, then leaves) that
  // the client's thread must receive and publish.
  for (int round = 0; round < 20; ++round) {
    for (int burst = 0; burst < 5; ++burst) sent += signal_other_threads(SIGUSR1);
    CoordinatorClient visitor(logger("visitor"));
    auto v = visitor.join(client_config(coordinator.endpoint(), "visitor"), soon());
    ASSERT_TRUE(v.is_ok()) << v.status().to_string();
    client.request_boundary(epoch, false);  // joiners are admitted at a step boundary
    auto with = client.wait_for_view(epoch + 1, soon());
    ASSERT_TRUE(with.is_ok()) << "round " << round << ": " << with.status().to_string();
    EXPECT_EQ(with->size(), 2u);
    sent += signal_other_threads(SIGUSR1);
    ASSERT_TRUE(visitor.leave(soon()).is_ok());
    auto without = client.wait_for_view(with->epoch + 1, soon());
    ASSERT_TRUE(without.is_ok()) << "round " << round << ": " << without.status().to_string();
    EXPECT_EQ(without->size(), 1u);
    epoch = without->epoch;
  }
  EXPECT_GT(sent, 100);
  EXPECT_GT(handled.load(), 0) << "no signal reached a handler: the test tested nothing";
  EXPECT_TRUE(client.health().is_ok()) << client.health().to_string();
  EXPECT_TRUE(client.leave(soon()).is_ok());
}

}  // namespace
}  // namespace tributary::control_client
