// `tributary status` (the real binary) against a live cluster of real processes, in every
// state an operator meets: forming (fewer than the world size), steady, a member stopped
// (SIGSTOP: a suspect whose heartbeat age grows, then removed), a joiner pending, and a
// coordinator killed with -9 and restarted from its journal (status answers again and
// shows the history). The --json output is parsed in every state, the table checked too.
// Then the failures: a wrong secret, an unreachable coordinator, bad flags.
//
// Every wait polls with a deadline; nothing sleeps to let an event happen.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <iostream>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr const char* kSecret = "status-test-secret";

struct StatusRun {
  int code = -1;  // -1: did not exit by the deadline
  std::string out;
  std::string err;
  double seconds = 0;
};

class StatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "google.protobuf.Struct is unusable in a TSan build against a non-TSan "
                    "libprotobuf";
#endif
  }

  // Runs `tributary status --coordinator endpoint extra...` with the secret in the
  // environment (never on the command line), bounded.
  StatusRun run(const std::string& endpoint, std::vector<std::string> extra = {},
                const std::string& secret = kSecret) {
    std::vector<std::string> argv = {tributary_bin(), "status", "--coordinator", endpoint};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<std::string> env;
    if (!secret.empty()) env.push_back("TRIBUTARY_SECRET=" + secret);
    const auto start = std::chrono::steady_clock::now();
    Process p(dir_, "status" + std::to_string(runs_++), argv, env);
    StatusRun r;
    r.code = p.wait_until(deadline_after(seconds(30))).value_or(-1);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.out = p.out();
    r.err = p.err();
    return r;
  }

  // The --json report, parsed; an empty Struct (and a test failure) if there is none.
  Struct json(const std::string& endpoint) {
    const StatusRun r = run(endpoint, {"--json", "--timeout-ms", "2000"});
    Struct s;
    if (r.code != 0) return s;
    const auto parsed = google::protobuf::util::JsonStringToMessage(r.out, &s);
    EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << r.out;
    return s;
  }

  // Polls the --json report until `done` holds (bounded); the last report seen.
  Struct poll_json(const std::string& endpoint, const std::function<bool(const Struct&)>& done,
                   std::chrono::seconds limit = seconds(60)) {
    Struct last;
    poll_until(deadline_after(limit), [&] {
      last = json(endpoint);
      return last.fields_size() > 0 && done(last);
    });
    return last;
  }

  TempDir dir_;
  int runs_ = 0;
};

const google::protobuf::RepeatedPtrField<Value>& list(const Struct& s, const std::string& key) {
  static const google::protobuf::ListValue empty;
  auto it = s.fields().find(key);
  return it == s.fields().end() ? empty.values() : it->second.list_value().values();
}
std::string str(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? "" : it->second.string_value();
}
double num(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? -1 : it->second.number_value();
}

// Agents are named "<host>/<program>:<pid>". (Appending sidesteps GCC 12's false
// -Wrestrict on ":" + std::string.)
std::string pid_suffix(const Process& p) {
  std::string suffix(1, ':');
  suffix += std::to_string(p.pid());
  return suffix;
}

// The entry (in "members" or "joiners") of the agent process `p`.
const Struct* entry_of(const Struct& s, const Process& p, const std::string& where) {
  const std::string suffix = pid_suffix(p);
  for (const auto& v : list(s, where)) {
    if (str(v.struct_value(), "name").ends_with(suffix)) return &v.struct_value();
  }
  return nullptr;
}

std::string state_of(const Struct& s, const Process& p) {
  for (const char* where : {"members", "joiners"}) {
    if (const Struct* e = entry_of(s, p, where)) return str(*e, "state");
  }
  return "absent";
}

// A view change in the history with this cause (and, if given, removing `removed`).
const Struct* change(const Struct& s, const std::string& cause, const Process* removed = nullptr) {
  for (const auto& v : list(s, "history")) {
    const Struct& c = v.struct_value();
    if (str(c, "cause") != cause) continue;
    if (removed == nullptr) return &c;
    for (const auto& r : list(c, "removed")) {
      if (str(r.struct_value(), "name").ends_with(pid_suffix(*removed))) return &c;
    }
  }
  return nullptr;
}

std::string printable(const Struct& s) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(s, &out);
  return out;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST_F(StatusTest, EveryClusterStateFromFormingToACoordinatorRestart) {
  const std::string journal = dir_.file("coordinator.journal");
  // Removal by heartbeat timeout only (6 s; agents' data-plane deadlines are longer), so
  // a stopped member stays a suspect long enough to be seen, and a joiner that arrives
  // meanwhile waits for a boundary nobody can reach.
  const std::vector<std::string> coordinator_flags = {"--journal", journal,
                                                      "--heartbeat-timeout-ms", "6000"};
  CoordinatorProcess coordinator(dir_, "coordinator", kSecret, 3, coordinator_flags);
  const std::string endpoint = coordinator.wait_ready(deadline_after(seconds(30)));
  ASSERT_FALSE(endpoint.empty()) << coordinator.process->dump();
  const std::vector<std::string> soak = {
      "--workload",      "soak", "--soak-steps",        "1000000", "--soak-count", "1024",
      "--soak-delay-ms", "10",   "--deadline-floor-ms", "60000"};
  std::vector<std::unique_ptr<Process>> agents;
  auto start_agent = [&] {
    agents.push_back(std::make_unique<Process>(dir_, "agent" + std::to_string(agents.size()),
                                               agent_argv(endpoint, kSecret, soak)));
    return agents.back().get();
  };
  auto dump = [&] {
    std::string s = coordinator.process->dump();
    for (const auto& a : agents) s += a->name() + " stderr:\n" + a->err();
    return s;
  };

  // Forming: no member yet, then two of three waiting for the initial world.
  StatusRun table = run(endpoint);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("epoch 0  forming  0 in view (world size 3)"), std::string::npos)
      << table.out;
  Struct s = json(endpoint);
  EXPECT_EQ(str(s, "phase"), "forming") << printable(s);
  EXPECT_EQ(list(s, "members").size() + list(s, "joiners").size(), 0) << printable(s);
  Process* a = start_agent();
  Process* b = start_agent();
  s = poll_json(endpoint, [&](const Struct& r) {
    return state_of(r, *a) == "waiting" && state_of(r, *b) == "waiting";
  });
  EXPECT_EQ(str(s, "phase"), "forming") << printable(s);
  ASSERT_EQ(list(s, "joiners").size(), 2) << printable(s) << dump();
  EXPECT_EQ(num(s, "epoch"), 0);

  // Steady: three members in view, with step timings and a link to each peer as the agents
  // report it (they send their links with a heartbeat once connected).
  Process* c = start_agent();
  s = poll_json(endpoint, [&](const Struct& r) {
    if (str(r, "phase") != "steady" || list(r, "members").size() != 3) return false;
    for (const auto& m : list(r, "members")) {
      if (num(m.struct_value(), "timed_steps") < 2) return false;
      for (const auto& l : list(m.struct_value(), "links")) {
        if (str(l.struct_value(), "source") != "agent") return false;
      }
    }
    return true;
  });
  ASSERT_EQ(str(s, "phase"), "steady") << printable(s) << dump();
  const double steady_epoch = num(s, "epoch");
  std::map<double, std::string> address_of;  // member id -> data address
  for (const auto& m : list(s, "members"))
    address_of[num(m.struct_value(), "id")] = str(m.struct_value(), "data_address");
  for (const auto& v : list(s, "members")) {
    const Struct& m = v.struct_value();
    EXPECT_EQ(str(m, "state"), "in_view") << printable(m);
    // The agent measures compute; the coordinator derives the rest of the step (the first
    // steps after a join can report more compute than the interval: clamped at 0).
    EXPECT_GT(num(m, "step_seconds"), 0) << printable(m);
    EXPECT_GT(num(m, "compute_seconds"), 0) << printable(m);
    EXPECT_NEAR(num(m, "collective_seconds"),
                std::max(0.0, num(m, "step_seconds") - num(m, "compute_seconds")), 1e-6)
        << printable(m);
    EXPECT_GT(num(m, "straggler_score"), 0) << printable(m);
    EXPECT_LT(num(m, "heartbeat_age_ms"), 3000) << printable(m);
    ASSERT_EQ(list(m, "links").size(), 2) << printable(m);
    for (const auto& l : list(m, "links")) {
      // One host, the default transport: shared memory, a single path per pair (no
      // failover: one data address), no move.
      const Struct& link = l.struct_value();
      EXPECT_EQ(str(link, "transport"), "shm") << printable(link);
      EXPECT_EQ(str(link, "source"), "agent") << printable(link);
      EXPECT_NE(address_of.count(num(link, "peer")), 0u) << printable(link);
      EXPECT_FALSE(str(link, "address").empty()) << printable(link);
      ASSERT_EQ(list(link, "paths").size(), 1) << printable(link);
      EXPECT_EQ(list(link, "paths")[0].string_value(), "shm") << printable(link);
      EXPECT_EQ(num(link, "moves"), 0) << printable(link);
    }
  }
  ASSERT_NE(change(s, "initial"), nullptr) << printable(s);
  EXPECT_EQ(list(*change(s, "initial"), "joined").size(), 3) << printable(s);
  table = run(endpoint);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("steady  3 in view"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(pid_suffix(*c)), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" initial "), std::string::npos) << table.out;

  // Asking is read-only: a burst of requests changes no view and admits nobody.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(run(endpoint, {"--json"}).code, 0);
  s = json(endpoint);
  EXPECT_EQ(num(s, "epoch"), steady_epoch) << printable(s);
  EXPECT_EQ(list(s, "members").size(), 3) << printable(s);
  EXPECT_EQ(count(coordinator.process->err(), "joined from"), 3) << coordinator.process->err();
  EXPECT_EQ(count(coordinator.process->err(), "malformed"), 0) << coordinator.process->err();

  // A member stopped: a suspect whose heartbeat age grows; a joiner meanwhile is pending.
  c->signal(SIGSTOP);
  Process* d = start_agent();
  s = poll_json(endpoint, [&](const Struct& r) {
    return state_of(r, *c) == "suspect" && state_of(r, *d) == "pending";
  });
  ASSERT_EQ(state_of(s, *c), "suspect") << printable(s) << dump();
  ASSERT_EQ(state_of(s, *d), "pending") << printable(s) << dump();
  const double first_age = num(*entry_of(s, *c, "members"), "heartbeat_age_ms");
  EXPECT_GE(first_age, num(s, "suspect_after_ms"));
  s = poll_json(endpoint, [&](const Struct& r) {
    const Struct* e = entry_of(r, *c, "members");
    return e != nullptr && num(*e, "heartbeat_age_ms") > first_age;
  });
  ASSERT_NE(entry_of(s, *c, "members"), nullptr) << printable(s) << dump();
  table = run(endpoint);
  EXPECT_NE(table.out.find(" suspect "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" pending "), std::string::npos) << table.out;

  // ... then removed for its silence, and the joiner admitted at the next boundary.
  s = poll_json(endpoint, [&](const Struct& r) {
    return state_of(r, *c) == "absent" && state_of(r, *d) == "in_view" &&
           change(r, "failure", c) != nullptr;
  });
  ASSERT_EQ(state_of(s, *c), "absent") << printable(s) << dump();
  ASSERT_EQ(state_of(s, *d), "in_view") << printable(s) << dump();
  const Struct* failure = change(s, "failure", c);
  ASSERT_NE(failure, nullptr) << printable(s);
  EXPECT_EQ(str(list(*failure, "removed")[0].struct_value(), "reason"), "heartbeat_timeout");
  const double epoch_before_kill = num(s, "epoch");
  const std::string instance_before = str(s, "instance_id");

  // The coordinator killed with -9 and restarted on its endpoint from its journal.
  coordinator.process->signal(SIGKILL);
  ASSERT_TRUE(coordinator.process->wait_until(deadline_after(seconds(10))).has_value());
  std::vector<std::unique_ptr<Process>> restarted;
  ASSERT_TRUE(poll_until(
      deadline_after(seconds(30)),
      [&] {
        const std::string ready =
            dir_.file("restart" + std::to_string(restarted.size()) + ".endpoint");
        std::vector<std::string> argv = {tributary_bin(), "coordinator", "--bind",       endpoint,
                                         "--ready-file",  ready,         "--world-size", "3",
                                         "--secret",      kSecret};
        argv.insert(argv.end(), coordinator_flags.begin(), coordinator_flags.end());
        restarted.push_back(std::make_unique<Process>(
            dir_, "coordinator_restart" + std::to_string(restarted.size()), argv));
        Process& p = *restarted.back();
        return poll_until(deadline_after(seconds(5)),
                          [&] { return !read_file(ready).empty() || p.poll().has_value(); }) &&
               !p.exited();
      }))
      << "the coordinator could not be restarted on " << endpoint;
  s = poll_json(endpoint, [&](const Struct& r) {
    return str(r, "phase") == "steady" && change(r, "resume") != nullptr;
  });
  ASSERT_EQ(str(s, "phase"), "steady") << printable(s) << restarted.back()->dump() << dump();
  EXPECT_NE(str(s, "instance_id"), instance_before);
  EXPECT_GT(num(s, "epoch"), epoch_before_kill);
  EXPECT_EQ(state_of(s, *a), "in_view") << printable(s);
  EXPECT_EQ(state_of(s, *d), "in_view") << printable(s);
  // The history before the kill came back from the journal, causes and reasons included.
  const Struct* old_failure = change(s, "failure", c);
  ASSERT_NE(old_failure, nullptr) << printable(s);
  EXPECT_TRUE(old_failure->fields().at("from_journal").bool_value());
  ASSERT_NE(change(s, "initial"), nullptr) << printable(s);
  EXPECT_TRUE(change(s, "initial")->fields().at("from_journal").bool_value());
  EXPECT_FALSE(change(s, "resume")->fields().at("from_journal").bool_value());
  table = run(endpoint);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("1*"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("(heartbeat_timeout)"), std::string::npos) << table.out;
  std::cout << "the status table after the restart:\n" << table.out;
}

TEST_F(StatusTest, WrongSecretUnreachableAndBadFlagsFailClearly) {
  CoordinatorProcess coordinator(dir_, "coordinator", kSecret, 2);
  const std::string endpoint = coordinator.wait_ready(deadline_after(seconds(30)));
  ASSERT_FALSE(endpoint.empty()) << coordinator.process->dump();

  StatusRun r = run(endpoint, {}, "not the secret");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << "a client without the secret gets nothing:\n" << r.out;
  EXPECT_NE(r.err.find("wrong cluster secret"), std::string::npos) << r.err;
  EXPECT_TRUE(coordinator.process->wait_for_line(
      std::regex("refused a connection from .*: .*wrong cluster secret"),
      deadline_after(seconds(10))))
      << coordinator.process->dump();

  r = run(endpoint, {}, "");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no cluster secret"), std::string::npos) << r.err;

  // Nobody listens there: the deadline ends the wait (never a hang).
  const std::string nobody = "tcp://127.0.0.1:" + std::to_string(pick_free_port());
  r = run(nobody, {"--timeout-ms", "700"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("no answer from the coordinator at " + nobody + " within 700 ms"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 10) << "the deadline was not kept";

  r = run("udp://nowhere");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not tcp://HOST:PORT"), std::string::npos) << r.err;
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--timeout-ms", "0"}, {"--timeout-ms", "soon"}, {"--no-such-flag"}}) {
    r = run(endpoint, bad);
    EXPECT_NE(r.code, 0) << bad[0];
    EXPECT_NE(r.code, -1) << bad[0];
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // Still serving, and nobody joined.
  EXPECT_EQ(run(endpoint, {"--json"}).code, 0);
  EXPECT_EQ(count(coordinator.process->err(), "joined from"), 0);
}

}  // namespace
}  // namespace tributary::integration
