// The `tributary` command as a user meets it: the demo trains and prints its summary; bad
// flags and impossible setups end with a non-zero status and a message naming the
// problem, promptly, never a hang.
#include <gtest/gtest.h>

#include <regex>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

struct Ran {
  int code = -1;
  std::string out;
  std::string err;
  std::string dump;
};

// Runs `tributary <args>` to completion (bounded); fails the test if it does not exit.
Ran run(const std::vector<std::string>& args, seconds limit = seconds(60),
        const std::vector<std::string>& env = {}) {
  TempDir dir;
  std::vector<std::string> argv = {tributary_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  Process p(dir, "tributary", argv, env);
  const auto code = p.wait_until(deadline_after(limit));
  Ran r;
  r.out = p.out();
  r.err = p.err();
  r.dump = p.dump();
  EXPECT_TRUE(code.has_value()) << "did not exit within " << limit.count() << " s\n" << r.dump;
  r.code = code.value_or(-1);
  return r;
}

TEST(Demo, TrainsAndPrintsASummaryWithAccuracy) {
  const Ran r =
      run({"demo", "--no-faults", "--workers", "3", "--epochs", "3", "--timeout-s", "240"},
          seconds(300));
  ASSERT_EQ(r.code, 0) << r.dump;
  std::smatch m;
  const std::regex summary(
      R"(summary: (\d+) steps in [0-9.]+ s, final loss [0-9.]+, test accuracy ([0-9.]+)%, 3 workers)");
  ASSERT_TRUE(std::regex_search(r.out, m, summary)) << r.dump;
  EXPECT_GT(std::stol(m[1]), 0);
  // Three epochs of the digits MLP is plenty to beat chance (10%) by far.
  EXPECT_GT(std::stod(m[2]), 50.0) << r.dump;
  EXPECT_NE(r.out.find("coordinator + 3 worker processes"), std::string::npos) << r.dump;
}

// `demo --ha` (scripts/demo.sh --ha): a local etcd, three coordinators, the leader killed
// with SIGKILL mid-run; a standby leads, training finishes in its view, the workers agree.
TEST(Demo, HaKillsTheLeadingCoordinatorAndTrainingGoesOn) {
  if (::access("/usr/bin/etcd", X_OK) != 0 && ::access("/usr/local/bin/etcd", X_OK) != 0)
    GTEST_SKIP() << "etcd is not installed (scripts/deps.sh installs Debian's etcd-server)";
  const Ran r = run({"demo", "--ha", "--workers", "3", "--epochs", "20", "--kill-leader-at", "10",
                     "--timeout-s", "240"},
                    seconds(300));
  ASSERT_EQ(r.code, 0) << r.dump;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("kill -9 of the leading coordinator"))) << r.dump;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(leads now, \d+ ms after the kill)")))
      << r.dump;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(3 workers at the end, view epoch [2-9])")))
      << "training did not finish in a view of the new leader\n"
      << r.dump;
  EXPECT_NE(r.out.find("hold bitwise-identical parameters"), std::string::npos) << r.dump;
}

// The compressed path end to end: Worker::all_reduce_compressed between real processes,
// top-k with error feedback and a short warm-up. The workers must still learn, agree to the
// bit, and put far fewer bytes on the wire than float32 would.
TEST(Demo, TrainsThroughTopKCompression) {
  const Ran r = run({"demo", "--workers", "3", "--epochs", "3", "--codec",
                     "topk:density=0.01,warmup=10", "--timeout-s", "240"},
                    seconds(300));
  ASSERT_EQ(r.code, 0) << r.dump;
  std::smatch m;
  const std::regex summary(
      R"(summary: (\d+) steps in [0-9.]+ s, final loss [0-9.]+, test accuracy ([0-9.]+)%, 3 workers.*wire ratio ([0-9.]+)x)");
  ASSERT_TRUE(std::regex_search(r.out, m, summary)) << r.dump;
  EXPECT_GT(std::stod(m[2]), 50.0) << r.dump;
  // 30 warm-up steps at 25%, 6.25% and 1.56%, the rest at 1%: well above 5x overall.
  EXPECT_GT(std::stod(m[3]), 5.0) << r.dump;
  EXPECT_NE(r.out.find("hold bitwise-identical parameters"), std::string::npos) << r.dump;
}

// Federated averaging (cli/federated_workload.h, Worker::federated_round): one member in
// four, drawn at random each round, sleeps past the round's deadline. Those rounds close
// without it, the late member is told and contributes in a later round, and the last round
// (everyone) leaves every member with the same bits.
TEST(Demo, FederatedRoundsGoOnWithoutLateMembers) {
  const int rounds = 8;
  const Ran r = run({"demo", "--federated", "--workers", "4", "--rounds", std::to_string(rounds),
                     "--late-fraction", "0.25", "--round-deadline-ms", "400", "--print-every",
                     "1", "--timeout-s", "240"},
                    seconds(300));
  ASSERT_EQ(r.code, 0) << r.dump;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(R"(summary: (\d+) rounds in [0-9.]+ s, test accuracy ([0-9.]+)%, 4 members)")))
      << r.dump;
  EXPECT_EQ(std::stoi(m[1]), rounds + 1) << r.dump;  // the final all-members round
  EXPECT_GT(std::stod(m[2]), 50.0) << r.dump;
  EXPECT_NE(r.out.find("4 surviving workers hold bitwise-identical parameters"), std::string::npos)
      << r.dump;
  // Every member ran every round, made it or missed it; one member per round missed it
  // (a member slowed by this busy machine may miss one more).
  int late = 0;
  int finals = 0;
  const std::regex final_line(R"(final: params sha256 [0-9a-f]{64} rounds (\d+) contributed (\d+) late (\d+))");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), final_line);
       it != std::sregex_iterator(); ++it) {
    ++finals;
    EXPECT_EQ(std::stoi((*it)[1]), rounds + 1);
    EXPECT_EQ(std::stoi((*it)[2]) + std::stoi((*it)[3]), rounds + 1) << r.dump;
    late += std::stoi((*it)[3]);
  }
  EXPECT_EQ(finals, 4) << r.dump;
  EXPECT_GE(late, rounds) << r.dump;
  EXPECT_LE(late, 2 * rounds) << r.dump;
  // Rank 0's table marks the rounds it missed itself; a round's contributors are 3 of 4
  // when one member was late.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n\s+\d+\s+3\s+\d+\s+[0-9.]+%)")))
      << r.dump;
}

// A codec the convergence evidence says loses accuracy trains, with a warning saying so
// and what to change, in the header (docs/compression.md,
// compression/collectives/convergence_advice.h).
TEST(Demo, WarnsAboutACodecKnownToLoseAccuracy) {
  const Ran r = run({"demo", "--workers", "2", "--epochs", "1", "--codec", "topk:density=0.0005",
                     "--timeout-s", "120"},
                    seconds(180));
  ASSERT_EQ(r.code, 0) << r.dump;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(
          R"(warning: --codec topk:density=0.0005: top-k below density 0.001 .*loses accuracy)")))
      << r.dump;
  const Ran fine =
      run({"demo", "--workers", "2", "--epochs", "1", "--codec", "topk", "--timeout-s", "120"},
          seconds(180));
  ASSERT_EQ(fine.code, 0) << fine.dump;
  EXPECT_EQ(fine.out.find("warning:"), std::string::npos) << fine.dump;
}

struct BadInvocation {
  std::string name;
  std::vector<std::string> args;
  std::string message;  // a regex the stderr must contain
};

void PrintTo(const BadInvocation& b, std::ostream* os) { *os << b.name; }

class BadFlags : public ::testing::TestWithParam<BadInvocation> {};

TEST_P(BadFlags, ExitNonZeroWithAClearMessage) {
  const Ran r = run(GetParam().args, seconds(60));
  EXPECT_NE(r.code, 0) << r.dump;
  EXPECT_TRUE(std::regex_search(r.err + r.out, std::regex(GetParam().message))) << r.dump;
}

INSTANTIATE_TEST_SUITE_P(
    Cli, BadFlags,
    ::testing::Values(
        BadInvocation{"bench_unknown_dtype",
                      {"bench", "--dtype", "float128"},
                      "--dtype: unknown type 'float128'"},
        BadInvocation{"bench_unknown_op",
                      {"bench", "--op", "all_reduce,frobnicate"},
                      "--op: unknown collective 'frobnicate'"},
        BadInvocation{
            "bench_unknown_redop", {"bench", "--redop", "median"}, "--redop: unknown op 'median'"},
        BadInvocation{
            "bench_min_over_max", {"bench", "-b", "1M", "-e", "4K"}, "-b must not exceed -e"},
        BadInvocation{"check_unknown_algorithm",
                      {"check", "--np", "2", "--algorithm", "bogo"},
                      "--algorithm: unknown algorithm 'bogo'"},
        BadInvocation{"check_zero_processes", {"check", "--np", "0"}, "--np"},
        BadInvocation{"agent_without_secret", {"agent"}, "no cluster secret"},
        BadInvocation{"coordinator_without_secret",
                      {"coordinator", "--bind", "tcp://127.0.0.1:0"},
                      "no cluster secret"},
        BadInvocation{"agent_unknown_workload",
                      {"agent", "--secret", "s", "--workload", "dance"},
                      "--workload"},
        BadInvocation{"agent_unknown_mismatch",
                      {"agent", "--secret", "s", "--mismatch", "size"},
                      "--mismatch"},
        BadInvocation{"demo_no_faults_and_a_fault",
                      {"demo", "--no-faults", "--kill-at", "5"},
                      "--no-faults: and a fault flag too"},
        BadInvocation{"demo_run_dir_that_cannot_be",
                      {"demo", "--run-dir", "/proc/no-such-place/run"},
                      "--run-dir: cannot create /proc/no-such-place/run"},
        BadInvocation{"demo_codec_known_to_diverge",
                      {"demo", "--codec", "sign:ef=0"},
                      "--codec sign:ef=0: sign without error feedback \\(ef=0\\) diverges"},
        BadInvocation{"demo_codec_key_it_does_not_have",
                      {"demo", "--codec", "qint8:density=0.5"},
                      "--codec: .*'density' is not a parameter of qint8"},
        BadInvocation{"agent_codec_unknown",
                      {"agent", "--secret", "s", "--codec", "int3"},
                      "--codec: .*unknown codec 'int3'"},
        BadInvocation{"coordinator_unknown_log_format",
                      {"coordinator", "--secret", "s", "--log-format", "xml"},
                      "--log-format"},
        BadInvocation{"agent_unknown_log_level",
                      {"agent", "--secret", "s", "--log-level", "loud"},
                      "--log-level"},
        BadInvocation{"no_subcommand", {}, "subcommand"},
        // CLI11 answers "A subcommand is required" without naming the word it did not know.
        BadInvocation{"unknown_subcommand", {"frobnicate"}, "subcommand"}),
    [](const auto& info) { return info.param.name; });

TEST(Agent, WithNoCoordinatorGivesUpAtItsJoinDeadline) {
  // Nobody listens on this port (a moment ago, at least); the agent must not wait forever.
  const int port = pick_free_port();
  ASSERT_GT(port, 0);
  const auto t0 = std::chrono::steady_clock::now();
  const Ran r =
      run({"agent", "--secret", "s", "--coordinator", "tcp://127.0.0.1:" + std::to_string(port),
           "--join-timeout-ms", "2000", "--workload", "check"},
          seconds(60));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.code, 0) << r.dump;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("no answer from coordinator"))) << r.dump;
  EXPECT_LT(took, 30.0) << r.dump;
}

TEST(Help, EverySubcommandExplainsItself) {
  for (const char* sub : {"coordinator", "agent", "bench", "check", "demo"}) {
    const Ran r = run({sub, "--help"}, seconds(30));
    EXPECT_EQ(r.code, 0) << sub << "\n" << r.dump;
    EXPECT_NE(r.out.find("--"), std::string::npos) << sub << "\n" << r.dump;
  }
}

}  // namespace
}  // namespace tributary::integration
