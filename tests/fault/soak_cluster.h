// A coordinator and `tributary agent --workload soak` processes for the fault-tolerance
// tests, plus the checker every test runs at the end: the soak lines of every agent, for
// every step, must agree bitwise (same SHA-256, same view, same contributors), no line may
// say WRONG, and every agent must be among the contributors it lists.
//
// Every wait polls the agents' output files with a deadline; nothing sleeps to let an
// event happen. Processes die with the test (tests/integration/process.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/process.h"

namespace tributary::fault {

using namespace tributary::integration;

// One "soak step S view E contributors a,b,c attempts A sha256 H ok|WRONG" line.
struct StepLine {
  long step = -1;
  std::uint64_t view = 0;
  std::vector<std::uint64_t> contributors;
  int attempts = 0;
  std::string hash;
  bool ok = false;
  std::uint64_t member = 0;  // from the preceding "soak member M" line
};

// What one agent printed on stdout (complete lines only).
struct AgentReport {
  std::vector<StepLine> steps;
  std::vector<std::uint64_t> members;  // one per (re)join
  bool left = false;                   // "soak left after step S" (drained)
  std::vector<std::string> bad_lines;  // soak lines that do not parse
};

inline std::vector<std::uint64_t> parse_ids(const std::string& s) {
  std::vector<std::uint64_t> ids;
  std::size_t start = 0;
  while (start < s.size()) {
    const std::size_t comma = std::min(s.find(',', start), s.size());
    ids.push_back(std::stoull(s.substr(start, comma - start)));
    start = comma + 1;
  }
  return ids;
}

inline AgentReport parse_report(const std::string& out) {
  static const std::regex step_re(
      R"(^soak step (\d+) view (\d+) contributors ([0-9,]+) attempts (\d+) sha256 ([0-9a-f]{64}) (ok|WRONG)$)");
  static const std::regex member_re(R"(^soak member (\d+)$)");
  AgentReport r;
  std::uint64_t member = 0;
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = out.find('\n', start);
    if (nl == std::string::npos) break;  // a line still being written
    const std::string line = out.substr(start, nl - start);
    start = nl + 1;
    std::smatch m;
    if (std::regex_match(line, m, step_re)) {
      StepLine s;
      s.step = std::stol(m[1]);
      s.view = std::stoull(m[2]);
      s.contributors = parse_ids(m[3]);
      s.attempts = std::stoi(m[4]);
      s.hash = m[5];
      s.ok = m[6] == "ok";
      s.member = member;
      r.steps.push_back(std::move(s));
    } else if (std::regex_match(line, m, member_re)) {
      member = std::stoull(m[1]);
      r.members.push_back(member);
    } else if (line.rfind("soak left after step", 0) == 0) {
      r.left = true;
    } else if (line.rfind("soak", 0) == 0) {
      r.bad_lines.push_back(line);
    }
  }
  return r;
}

// The cheap progress probe: the last complete step line's S, or -1.
inline long last_step(const std::string& out) {
  static const std::string key = "soak step ";
  const std::size_t end = out.rfind('\n');
  if (end == std::string::npos) return -1;
  std::size_t pos = out.rfind(key, end);
  while (pos != std::string::npos && pos != 0 && out[pos - 1] != '\n')
    pos = out.rfind(key, pos - 1);
  if (pos == std::string::npos) return -1;
  return std::stol(out.substr(pos + key.size()));
}

struct Consistency {
  std::vector<std::string> problems;
  long steps_seen = 0;     // distinct steps printed by anyone
  long cross_checked = 0;  // (step, agent) pairs compared with another agent's line
  long max_step = -1;
  int max_attempts = 1;
  std::map<long, StepLine> by_step;  // the first line seen for each step
};

// The invariant of every scenario: one history. Same step => same bits, same epoch, same
// contributors; each agent among the contributors of what it committed; its steps
// strictly increasing; no WRONG.
inline Consistency check_consistency(const std::vector<const Process*>& agents) {
  Consistency c;
  for (const Process* p : agents) {
    const AgentReport r = parse_report(p->out());
    for (const auto& l : r.bad_lines)
      c.problems.push_back(p->name() + ": unparsable soak line: " + l);
    long previous = -1;
    for (const StepLine& s : r.steps) {
      const std::string where = p->name() + " step " + std::to_string(s.step);
      if (!s.ok)
        c.problems.push_back(where + ": WRONG (differs from the reference over its contributors)");
      if (s.step <= previous) {
        c.problems.push_back(where + ": not after its previous step " + std::to_string(previous));
      }
      previous = s.step;
      if (std::find(s.contributors.begin(), s.contributors.end(), s.member) ==
          s.contributors.end()) {
        c.problems.push_back(where + ": member " + std::to_string(s.member) +
                             " is not among its contributors");
      }
      if (std::set<std::uint64_t>(s.contributors.begin(), s.contributors.end()).size() !=
          s.contributors.size()) {
        c.problems.push_back(where + ": a contributor is listed twice");
      }
      c.max_step = std::max(c.max_step, s.step);
      c.max_attempts = std::max(c.max_attempts, s.attempts);
      auto [it, first] = c.by_step.emplace(s.step, s);
      if (first) continue;
      ++c.cross_checked;
      const StepLine& o = it->second;
      if (o.hash != s.hash)
        c.problems.push_back(where + ": sha256 " + s.hash + " but another agent has " + o.hash);
      if (o.view != s.view) {
        c.problems.push_back(where + ": committed in view " + std::to_string(s.view) +
                             ", another agent in view " + std::to_string(o.view));
      }
      if (o.contributors != s.contributors)
        c.problems.push_back(where + ": contributors differ from another agent's");
    }
  }
  c.steps_seen = static_cast<long>(c.by_step.size());
  return c;
}

inline std::string tail(const std::string& s, std::size_t bytes) {
  return s.size() <= bytes ? s : "[...]\n" + s.substr(s.size() - bytes);
}

class SoakCluster {
 public:
  // `world`: the coordinator's initial world size. The soak buffers are `count` floats.
  explicit SoakCluster(int world, std::vector<std::string> coordinator_extra = {},
                       std::vector<std::string> agent_extra = {})
      : agent_extra_(std::move(agent_extra)) {
    coordinator =
        std::make_unique<CoordinatorProcess>(dir, "coordinator", secret, world, coordinator_extra);
    endpoint = coordinator->wait_ready(deadline_after(seconds(20)));
    if (endpoint.empty())
      ADD_FAILURE() << "the coordinator did not start\n" << coordinator->process->dump();
  }

  // Starts one more agent (with `extra` after the common flags).
  Process& add_agent(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--workload", "soak"};
    args.insert(args.end(), agent_extra_.begin(), agent_extra_.end());
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string name = "agent" + std::to_string(agents.size());
    agents.push_back(std::make_unique<Process>(dir, name, agent_argv(endpoint, secret, args)));
    return *agents.back();
  }

  std::vector<const Process*> all() const {
    std::vector<const Process*> v;
    for (const auto& a : agents) v.push_back(a.get());
    return v;
  }

  // Waits until every listed agent has printed step >= `step` (bounded).
  bool wait_steps(const std::vector<Process*>& who, long step, SteadyTime deadline) {
    return poll_until(deadline, [&] {
      for (Process* p : who) {
        if (last_step(p->out()) < step) return false;
      }
      return true;
    });
  }
  // The largest step any agent has printed.
  long max_step() const {
    long m = -1;
    for (const auto& a : agents) m = std::max(m, last_step(a->out()));
    return m;
  }

  // The coordinator's log, and the epochs of the views it issued.
  std::string coordinator_log() const { return coordinator->process->err(); }

  // Everything, for a failure message (tails: a soak prints a line per step).
  std::string dump() const {
    std::string s = "==== coordinator:\n" + tail(coordinator_log(), 12000);
    for (const auto& p : extra_coordinators)
      s += "==== " + p->name() + ":\n" + tail(p->err(), 12000);
    for (const auto& a : agents) {
      s += "==== " + a->name() + ": " + a->command_line() + "\n---- stdout:\n" +
           tail(a->out(), 3000) + "---- stderr:\n" + tail(a->err(), 5000);
    }
    return s;
  }

  // Asserts the one-history invariant over every agent's output; returns the summary.
  Consistency expect_consistent() const {
    Consistency c = check_consistency(all());
    std::string all_problems;
    for (std::size_t i = 0; i < c.problems.size() && i < 20; ++i)
      all_problems += c.problems[i] + "\n";
    EXPECT_TRUE(c.problems.empty()) << c.problems.size() << " problems:\n"
                                    << all_problems << dump();
    EXPECT_GT(c.cross_checked, 0) << "no step was printed by two agents\n" << dump();
    return c;
  }

  TempDir dir;
  const std::string secret = "fault-tests-secret";
  std::unique_ptr<CoordinatorProcess> coordinator;
  std::vector<std::unique_ptr<Process>> extra_coordinators;  // restarted ones
  std::string endpoint;
  std::vector<std::unique_ptr<Process>> agents;

 private:
  std::vector<std::string> agent_extra_;
};

inline std::vector<Process*> except(const std::vector<std::unique_ptr<Process>>& all,
                                    const std::set<const Process*>& gone) {
  std::vector<Process*> v;
  for (const auto& p : all) {
    if (!gone.count(p.get())) v.push_back(p.get());
  }
  return v;
}

// Waits for each listed process to exit (bounded); returns name -> status (-1: still running).
inline std::map<std::string, int> wait_exits(const std::vector<Process*>& who,
                                             SteadyTime deadline) {
  std::map<std::string, int> codes;
  for (Process* p : who) {
    auto code = p->wait_until(deadline);
    codes[p->name()] = code ? *code : -1;
  }
  return codes;
}

inline int count_matches(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// Drains every listed agent (SIGTERM) and expects each to exit 0 within the deadline.
inline void drain_and_expect_clean_exit(const SoakCluster& cluster,
                                        const std::vector<Process*>& who, SteadyTime deadline) {
  for (Process* p : who) p->signal(SIGTERM);
  const auto codes = wait_exits(who, deadline);
  for (const auto& [name, code] : codes) {
    EXPECT_EQ(code, 0) << name
                       << (code < 0 ? " did not exit by the deadline (hang)" : " exited badly")
                       << "\n"
                       << cluster.dump();
  }
}

// Waits (bounded) for `p` to print a step line after the one it printed last, polling
// every millisecond: the reference point of an injection at a random offset.
inline long wait_next_step(Process& p, SteadyTime deadline) {
  const long before = last_step(p.out());
  long now = before;
  while (std::chrono::steady_clock::now() < deadline) {
    now = last_step(p.out());
    if (now > before) return now;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return -1;
}

// The member id an agent printed last ("soak member M").
inline std::uint64_t current_member(const Process& p) {
  const AgentReport r = parse_report(p.out());
  return r.members.empty() ? 0 : r.members.back();
}

inline int recovering_lines(const Process& p) {
  static const std::regex re("; recovering");
  return count_matches(p.err(), re);
}

// A seed per run, printed so a failure can be replayed (TRIBUTARY_FAULT_SEED overrides).
inline std::uint64_t test_seed() {
  if (const char* s = std::getenv("TRIBUTARY_FAULT_SEED")) return std::stoull(s);
  return std::random_device{}();
}

}  // namespace tributary::fault
