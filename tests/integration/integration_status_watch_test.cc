// `tributary status --watch` in a real terminal: tmux runs it in a pane of its own (a
// private tmux server in the test's directory), the test reads the screen with
// capture-pane. Three agents in view, one killed with -9: the same screen changes to two,
// with the failure in its history; the report is redrawn in place (one report on the
// screen, not a scroll of them); Ctrl-C ends it. Every wait polls with a deadline.
#include <gtest/gtest.h>

#include <regex>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

constexpr const char* kSecret = "watch-test-secret";

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// tmux on a socket of the test's own, so nothing else's sessions are touched.
class Tmux {
 public:
  explicit Tmux(const TempDir& dir) : dir_(dir), socket_(dir.file("tmux.sock")) {}
  ~Tmux() { (void)run({"kill-server"}); }

  // Runs `tmux -S socket args...` to completion (bounded); its stdout.
  std::optional<std::string> run(std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/tmux", "-S", socket_};
    argv.insert(argv.end(), args.begin(), args.end());
    Process p(dir_, "tmux" + std::to_string(calls_++), argv, {"TERM=xterm-256color"});
    const auto code = p.wait_until(deadline_after(seconds(20)));
    if (!code || *code != 0) return std::nullopt;
    return p.out();
  }
  std::string screen() { return run({"capture-pane", "-p", "-t", "watch"}).value_or(""); }

 private:
  const TempDir& dir_;
  std::string socket_;
  int calls_ = 0;
};

TEST(StatusWatch, TheScreenChangesWhenAMemberIsKilled) {
  if (::access("/usr/bin/tmux", X_OK) != 0)
    GTEST_SKIP() << "tmux is not installed (scripts/deps.sh installs Debian's tmux)";
  TempDir dir;
  CoordinatorProcess coordinator(dir, "coordinator", kSecret, 3);
  const std::string endpoint = coordinator.wait_ready(deadline_after(seconds(30)));
  ASSERT_FALSE(endpoint.empty()) << coordinator.process->dump();
  const std::vector<std::string> soak = {"--workload",      "soak", "--soak-steps", "1000000",
                                         "--soak-count",    "1024", "--soak-delay-ms", "10"};
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> flags = soak;
    if (i == 0) flags.insert(flags.end(), {"--name", "pod-alpha"});  // as in a container
    agents.push_back(std::make_unique<Process>(dir, "agent" + std::to_string(i),
                                               agent_argv(endpoint, kSecret, flags)));
  }

  Tmux tmux(dir);
  const std::string command = "TRIBUTARY_SECRET=" + std::string(kSecret) + " exec " +
                              tributary_bin() + " status --watch --interval-ms 200 --coordinator " +
                              endpoint;
  ASSERT_TRUE(tmux.run({"new-session", "-d", "-s", "watch", "-x", "200", "-y", "60", command}))
      << "tmux could not start a session";
  std::string screen;
  ASSERT_TRUE(poll_until(deadline_after(seconds(60)), [&] {
    screen = tmux.screen();
    return screen.find("3 in view") != std::string::npos &&
           screen.find("steady") != std::string::npos;
  })) << screen << coordinator.process->dump();
  EXPECT_NE(screen.find("every 200 ms: tributary status " + endpoint), std::string::npos) << screen;
  EXPECT_EQ(count(screen, "recent view changes"), 1) << "redrawn in place\n" << screen;
  EXPECT_TRUE(std::regex_search(screen, std::regex(R"(\n  \d +\d+ +pod-alpha )")))
      << "--name names the member\n" << screen;

  agents[2]->signal(SIGKILL);
  const std::string killed = ":" + std::to_string(agents[2]->pid());
  ASSERT_TRUE(poll_until(deadline_after(seconds(60)), [&] {
    screen = tmux.screen();
    return screen.find("2 in view") != std::string::npos &&
           std::regex_search(screen, std::regex("failure +2 +-\\d+ \\S+" + killed));
  })) << screen << coordinator.process->dump();
  EXPECT_EQ(count(screen, "recent view changes"), 1) << screen;
  EXPECT_EQ(screen.find("3 in view"), std::string::npos) << "an old report left over\n" << screen;
  // Nothing of the older, longer report shows through: no row of the killed member in the
  // members table, and every line is one of this report's (none the tail of another).
  EXPECT_FALSE(std::regex_search(screen, std::regex(killed + " .*in_view"))) << screen;
  EXPECT_EQ(count(screen, "joiners waiting:"), 1) << screen;
  EXPECT_EQ(count(screen, "links (every peer"), 1) << screen;

  // Ctrl-C ends the watch (and with it the pane's only process, so the session).
  ASSERT_TRUE(tmux.run({"send-keys", "-t", "watch", "C-c"}));
  EXPECT_TRUE(poll_until(deadline_after(seconds(20)),
                         [&] { return !tmux.run({"has-session", "-t", "watch"}).has_value(); }))
      << tmux.screen();
}

}  // namespace
}  // namespace tributary::integration
