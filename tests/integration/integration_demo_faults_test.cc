// The README's main job, as a newcomer runs it: `tributary demo` with no flags kills one
// worker (kill -9), freezes one (SIGSTOP, SIGCONT), adds one and drains one (SIGTERM), says
// what the cluster did about each, and ends with every fault handled, the survivors'
// identical parameters, the accuracy and a plot. Real processes on loopback.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(DemoDefault, EveryFaultIsHandledAndTheSurvivorsAgree) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  Process p(dir, "demo", {tributary_bin(), "demo", "--run-dir", run_dir, "--timeout-s", "240"});
  const auto code = p.wait_until(deadline_after(std::chrono::seconds(270)));
  ASSERT_TRUE(code.has_value()) << "the demo did not exit\n" << p.dump();
  const std::string out = p.out();
  ASSERT_EQ(*code, 0) << p.dump();

  // Each fault announced as it happens, then answered.
  EXPECT_EQ(count(out, std::regex(R"(\n>> step \d+  kill -9 worker \d)")), 1) << out;
  EXPECT_EQ(count(out, std::regex(R"(\n>> step \d+  SIGSTOP worker \d)")), 1) << out;
  EXPECT_EQ(count(out, std::regex(R"(\n>> step \d+  worker 5 starts \(pid \d+\))")), 1) << out;
  EXPECT_EQ(count(out, std::regex(R"(\n>> step \d+  SIGTERM worker \d)")), 1) << out;
  // The kill: a view that names who noticed, and the survivors' pause.
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(view \d+ \(failure\): worker 4 removed \((failure_confirmed|heartbeat_timeout)\), noticed by (worker \d|the coordinator))")))
      << out;
  EXPECT_GE(count(out, std::regex(R"(survivors paused \d+ (ms|\.\d+ s))")), 2) << out;
  // State handed over and verified: to the joiner, and to the frozen worker coming back.
  EXPECT_GE(count(out, std::regex(R"(received [0-9.]+ KiB of training state .* SHA-256 verified)")),
            2)
      << out;
  EXPECT_NE(out.find("SIGCONT worker 3"), std::string::npos) << out;
  EXPECT_NE(out.find("worker 3 back as a new member"), std::string::npos) << out;
  EXPECT_NE(out.find("nobody saw a failure"), std::string::npos) << out;
  EXPECT_NE(out.find("4 of 4 faults handled"), std::string::npos) << out;

  // The survivors agree to the bit, and the model learned (the recipe reaches ~97%).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"(demo: (\d+) surviving workers hold bitwise-identical parameters)")))
      << out;
  EXPECT_EQ(std::stoi(m[1]), 3) << "4 - kill + join - drain, the frozen one back" << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(summary: .*test accuracy ([0-9.]+)%)")))
      << out;
  EXPECT_GE(std::stod(m[1]), 90.0) << out;

  // Readable: the processes' log lines are in the run directory, not on the console.
  EXPECT_EQ(out.find("tributary[agent]"), std::string::npos) << out;
  EXPECT_EQ(out.find("tributary[coordinator]"), std::string::npos) << out;
  EXPECT_EQ(out.find("@step"), std::string::npos) << out;
  for (const char* file : {"coordinator.log", "worker-1.log", "worker-5.log", "demo.txt",
                           "steps.csv", "faults.csv"}) {
    EXPECT_TRUE(std::filesystem::exists(run_dir + "/" + file)) << file;
  }
  const std::string coordinator_log = read_file(run_dir + "/coordinator.log");
  EXPECT_NE(coordinator_log.find("view epoch"), std::string::npos);
  // The killed worker's kernel closed its control connection: the coordinator heard it (and
  // confirmed the report at once, Membership::connection_closed).
  EXPECT_NE(coordinator_log.find("control connection closed"), std::string::npos)
      << coordinator_log;
  EXPECT_NE(read_file(run_dir + "/demo.txt").find("4 of 4 faults handled"), std::string::npos);
  EXPECT_NE(out.find("run directory: " + run_dir), std::string::npos) << out;
  // The plot, where the demo says it is, is a PNG.
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(plot: (\S+\.png))"))) << out;
  EXPECT_EQ(m[1].str(), run_dir + "/training.png");
  EXPECT_EQ(read_file(m[1].str()).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const std::string faults = read_file(run_dir + "/faults.csv");
  EXPECT_EQ(count(faults, std::regex(R"(,1\n)")), 4) << faults;
}

// --verbose puts the processes' logs back on the terminal (the operator's view).
TEST(DemoDefault, VerboseShowsTheLogsAndNoFaultsIsAPlainRun) {
  TempDir dir;
  Process p(dir, "demo",
            {tributary_bin(), "demo", "--no-faults", "--verbose", "--workers", "2", "--epochs",
             "2", "--run-dir", dir.file("run"), "--timeout-s", "120"});
  const auto code = p.wait_until(deadline_after(std::chrono::seconds(150)));
  ASSERT_TRUE(code.has_value()) << p.dump();
  ASSERT_EQ(*code, 0) << p.dump();
  EXPECT_NE(p.err().find("tributary[coordinator]"), std::string::npos) << p.dump();
  EXPECT_NE(p.err().find("tributary[control]"), std::string::npos) << p.dump();
  EXPECT_EQ(p.out().find(">> "), std::string::npos) << "no faults\n" << p.dump();
  EXPECT_EQ(p.out().find("recovery summary"), std::string::npos) << p.dump();
  EXPECT_NE(p.out().find("2 surviving workers hold bitwise-identical parameters"),
            std::string::npos)
      << p.dump();
}

}  // namespace
}  // namespace tributary::integration
