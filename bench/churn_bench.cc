// The churn benchmark (not a test): a soak of a few minutes with random kill -9, SIGSTOP
// (SIGCONT a few seconds later) and joins at N between 3 and 8, against a failure-free run
// and a run with one kill -9 every 10 s, all in one invocation on this machine.
//
// Every line the coordinator and the agents print is read through pipes and timestamped
// on arrival. From those lines:
//   time-to-detect   fault -> the coordinator's first view without the victim
//                    (join: start -> the first view with the joiner)
//   time-to-recover  fault -> the first step a survivor commits without the victim
//                    (join: start -> the joiner's first committed step)
//   re-runs          collectives re-run after an abort (attempts - 1), summed
//   gaps             committed step numbers that never appeared
//   disagreements    steps printed with different hashes, views or contributors
//   wrong            "WRONG" lines (a result differs from its reference)
//   hangs            intervals of more than 30 s without a committed step
//   throughput       committed steps / s over the phase
//
// With --link-cuts (root: ss -K), the agents run over TCP with two data addresses on
// loopback (127.0.0.1, then 127.0.0.2 for the standby path: failover on by default), and
// the churn phase also cuts links, as often as it injects the other faults together: every
// connection of a random agent's first data address is aborted (ss -K), so its pairs fail
// over to the standby and re-dial. Any view that removes a member that was neither killed
// nor frozen, or rebuilds the links, is counted as caused by a link.
//
// With --control-faults, the churn phase also drains agents (SIGTERM: the agent leaves at
// its next step boundary; measured like a kill: the first view without it, the first step
// committed without it; it must exit 0) and kills the coordinator (kill -9, restarted at
// once on the same endpoint with the same journal: detected when it listens again,
// recovered when every member of the last view that was alive and running at the kill has
// resumed at it). Each kind as often as each of the others.
//
// Usage: churn_bench --tributary PATH [--duration-s 180] [--seed S] [--delay-ms 20]
//                    [--count 1048576] [--out FILE] [--phases free,churn,every10]
//                    [--link-cuts] [--control-faults]
//                    [--log-dir DIR (every process's lines, one file each)]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/churn_report.h"

namespace {

using tributary::bench::Fault;
using tributary::bench::Options;
using tributary::bench::PhaseResult;

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

double seconds_between(TimePoint a, TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

// A child with stdout and stderr on one pipe (non-blocking read end), in its own process
// group, killed if this driver dies.
struct Child {
  std::string name;
  pid_t pid = -1;
  int fd = -1;
  std::string pending;
  bool exited = false;
  int status = 0;
  bool stopped = false;
  bool killed = false;
  bool draining = false;     // sent SIGTERM to leave (--control-faults)
  std::uint64_t member = 0;  // current member id (agents)
  int data_port = 0;         // its first data address's port (its table listener), once logged
  std::vector<std::uint64_t> members;
  std::vector<std::string> last_lines;  // the latest few, for notes on a bad exit
  std::unique_ptr<std::ofstream> log;   // --log-dir: every line it printed

  ~Child() {
    if (pid > 0 && !exited) {
      ::kill(pid, SIGCONT);
      ::kill(pid, SIGKILL);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
    if (fd >= 0) ::close(fd);
  }
  void signal(int sig) const {
    if (pid > 0 && !exited) ::kill(pid, sig);
  }
  bool poll_exit() {
    if (exited) return true;
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      exited = true;
      status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    return exited;
  }
};

std::unique_ptr<Child> spawn(const std::string& name, const std::vector<std::string>& argv) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return nullptr;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return nullptr;
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(p[1], STDOUT_FILENO);
    ::dup2(p[1], STDERR_FILENO);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(p[1]);
  ::fcntl(p[0], F_SETFL, ::fcntl(p[0], F_GETFL) | O_NONBLOCK);
  auto c = std::make_unique<Child>();
  c->name = name;
  c->pid = pid;
  c->fd = p[0];
  return c;
}

struct StepRecord {
  std::string hash;
  std::uint64_t view = 0;
  std::string contributors;
  TimePoint first_seen;
};

class Phase {
 public:
  Phase(const Options& o, std::string name, std::mt19937_64& rng) : o_(o), rng_(rng) {
    r_.name = std::move(name);
  }

  PhaseResult run() {
    const std::string secret = "churn-bench-secret";
    ready_ = "/tmp/churn-bench-" + std::to_string(::getpid()) + "-" + r_.name + ".endpoint";
    std::remove(ready_.c_str());
    coordinator_args_ = {
        o_.tributary, "coordinator", "--world-size",           std::to_string(o_.start_world),
        "--secret",   secret,        "--straggler-cooldown-s", "5"};
    if (o_.control_faults) {
      journal_ = "/tmp/churn-bench-" + std::to_string(::getpid()) + "-" + r_.name + ".journal";
      std::remove(journal_.c_str());
      coordinator_args_.insert(coordinator_args_.end(), {"--journal", journal_});
    }
    std::vector<std::string> first = coordinator_args_;
    first.insert(first.end(), {"--bind", "tcp://127.0.0.1:0", "--ready-file", ready_});
    coordinator_ = spawn("coordinator", first);
    const TimePoint until_ready = Clock::now() + std::chrono::seconds(20);
    while (endpoint_.empty() && Clock::now() < until_ready) {
      std::ifstream in(ready_);
      std::getline(in, endpoint_);
      if (endpoint_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (endpoint_.empty()) {
      r_.notes.push_back("the coordinator did not start");
      return r_;
    }
    secret_ = secret;
    for (int i = 0; i < o_.start_world; ++i) start_agent();
    // The clock starts at the first committed step.
    const TimePoint startup_deadline = Clock::now() + std::chrono::seconds(60);
    while (steps_.empty() && Clock::now() < startup_deadline) pump(50);
    start_ = Clock::now();
    last_progress_ = start_;
    const TimePoint end =
        start_ + std::chrono::milliseconds(static_cast<long>(o_.duration_s * 1000));
    next_fault_ = start_ + next_interval();
    TimePoint last_sample = start_;
    double world_time = 0;
    while (Clock::now() < end) {
      pump(10);
      const TimePoint now = Clock::now();
      world_time += seconds_between(last_sample, now) * current_world_;
      last_sample = now;
      const double stall = seconds_between(last_progress_, now);
      r_.longest_stall = std::max(r_.longest_stall, stall);
      if (stall > 30 && !in_hang_) {
        in_hang_ = true;
        ++r_.hangs;
        r_.notes.push_back("no committed step for 30 s at t=" + fmt(seconds_between(start_, now)) +
                           " s");
      }
      for (auto& a : agents_) {
        if (a.stopped && now >= a.continue_at) {
          a.child->signal(SIGCONT);
          a.child->stopped = false;
          a.stopped = false;
        }
      }
      if (now >= next_fault_) {
        inject(now);
        next_fault_ = now + next_interval();
      }
    }
    r_.seconds = seconds_between(start_, Clock::now());
    r_.mean_world = world_time / std::max(1e-9, r_.seconds);
    // Count the window's steps before shutting down (the drain adds none).
    summarize();
    shutdown();
    return r_;
  }

 private:
  struct Agent {
    std::unique_ptr<Child> child;
    bool stopped = false;
    TimePoint continue_at;
  };

  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof(b), "%.1f", v);
    return b;
  }

  std::chrono::milliseconds next_interval() {
    if (r_.name == "free") return std::chrono::hours(24);
    if (r_.name == "every10") return std::chrono::seconds(10);
    return std::chrono::milliseconds(std::uniform_int_distribution<int>(3000, 7000)(rng_));
  }

  Child* start_agent() {
    std::vector<std::string> argv = {o_.tributary,         "agent",
                                     "--coordinator",      endpoint_,
                                     "--secret",           secret_,
                                     "--data-port",        "0",
                                     "--workload",         "soak",
                                     "--soak-count",       std::to_string(o_.count),
                                     "--soak-steps",       "-1",
                                     "--soak-duration-ms", "100000000",
                                     "--soak-delay-ms",    std::to_string(o_.delay_ms)};
    if (o_.link_cuts) {
      // Two networks on loopback (127.0.0.1 first, 127.0.0.2 the standby's), TCP: failover
      // on by default, and a cut (ss -K) of the first one fails the pairs with an error.
      for (const char* a : {"--bind-host", "0.0.0.0", "--data-address", "127.0.0.1",
                            "--data-address", "127.0.0.2", "--transport", "tcp"}) {
        argv.push_back(a);
      }
    }
    auto c = spawn("agent" + std::to_string(r_.agents_started++), argv);
    if (!c) return nullptr;
    agents_.push_back(Agent{std::move(c), false, {}});
    return agents_.back().child.get();
  }

  // Agents that are alive and not killed or leaving (stopped ones count: they come back).
  std::vector<Agent*> alive() {
    std::vector<Agent*> v;
    for (auto& a : agents_) {
      if (!a.child->exited && !a.child->killed && !a.child->draining) v.push_back(&a);
    }
    return v;
  }

  // kill -9 of the coordinator and its restart on the same endpoint with the same journal
  // (the agents know only that endpoint). The port was just released: a restart that
  // loses the bind race is tried again, for at most 10 s, the agents' lines read meanwhile.
  void restart_coordinator(Fault& f) {
    coordinator_->signal(SIGKILL);
    coordinator_->killed = true;
    old_coordinators_.push_back(std::move(coordinator_));
    for (const auto& a : agents_) {
      if (a.child->exited || a.child->killed || a.child->stopped || a.child->draining) continue;
      if (!views_.empty() && views_.back().second.count(a.child->member)) {
        f.awaiting.insert(a.child->member);
      }
    }
    const TimePoint give_up = Clock::now() + std::chrono::seconds(10);
    for (int attempt = 0; Clock::now() < give_up; ++attempt) {
      const std::string ready = ready_ + ".restart" + std::to_string(restarts_++);
      std::vector<std::string> argv = coordinator_args_;
      argv.insert(argv.end(), {"--bind", endpoint_, "--ready-file", ready});
      coordinator_ = spawn("coordinator" + std::to_string(restarts_), argv);
      if (!coordinator_) break;
      for (;;) {
        pump(10);
        std::string line;
        std::ifstream in(ready);
        std::getline(in, line);
        if (!line.empty()) {
          f.detect = seconds_between(f.at, Clock::now());
          std::remove(ready.c_str());
          if (f.awaiting.empty()) f.recover = f.detect;
          return;
        }
        if (coordinator_->poll_exit() || Clock::now() >= give_up) break;
      }
      old_coordinators_.push_back(std::move(coordinator_));
      std::remove(ready.c_str());
    }
    r_.notes.push_back("the coordinator did not restart within 10 s of its kill");
  }

  void inject(TimePoint now) {
    auto live = alive();
    const int n = static_cast<int>(live.size());
    std::vector<std::string> kinds;
    if (r_.name == "every10") {
      kinds = {"kill"};
    } else {
      if (n > 3) kinds.insert(kinds.end(), {"kill", "stop"});
      if (n < 8) kinds.push_back("join");
      if (o_.control_faults) {
        if (n > 3) kinds.push_back("drain");
        if (coordinator_) kinds.push_back("coordinator");
      }
      // Link cuts as often as the other faults together.
      if (o_.link_cuts) kinds.insert(kinds.end(), kinds.size(), "cut");
    }
    std::vector<Agent*> candidates;
    for (Agent* a : live) {
      if (!a->stopped && a->child->member != 0) candidates.push_back(a);
    }
    std::string kind = kinds[std::uniform_int_distribution<std::size_t>(0, kinds.size() - 1)(rng_)];
    if (kind != "join" && kind != "coordinator" && candidates.empty()) kind = "join";
    if (kind == "cut") {
      std::erase_if(candidates, [](const Agent* a) { return a->child->data_port == 0; });
      if (candidates.empty()) kind = "join";
    }
    Fault f;
    f.kind = kind;
    f.at = now;
    if (kind == "join") {
      Child* joiner = start_agent();
      f.who = joiner ? joiner->name : "";
    } else if (kind == "coordinator") {
      f.who = "coordinator";
      r_.faults.push_back(f);
      restart_coordinator(r_.faults.back());
      return;
    } else {
      Agent* v =
          candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(rng_)];
      f.who = v->child->name;
      f.member = v->child->member;
      if (kind == "cut") {
        // Every connection of its first data address (the pairs' preferred path), both
        // ends: the kernel aborts them (an error, not a stall). Its standbys stay.
        const std::string port = std::to_string(v->child->data_port);
        const std::string cmd =
            "ss -K '( sport = :" + port + " or dport = :" + port + " )' >/dev/null 2>&1";
        if (std::system(cmd.c_str()) != 0) r_.notes.push_back("`" + cmd + "` failed");
        ++r_.cuts;
      } else if (kind == "kill") {
        v->child->signal(SIGKILL);
        v->child->killed = true;
      } else if (kind == "drain") {
        v->child->signal(SIGTERM);
        v->child->draining = true;
      } else {
        v->child->signal(SIGSTOP);
        v->child->stopped = true;
        v->stopped = true;
        v->continue_at =
            now + std::chrono::milliseconds(std::uniform_int_distribution<int>(3000, 5000)(rng_));
      }
      if (r_.name == "every10") start_agent();  // the replacement arrives with the failure
    }
    r_.faults.push_back(f);
  }

  void pump(int timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    auto add = [&](Child* c) {
      if (c && c->fd >= 0) {
        fds.push_back({c->fd, POLLIN, 0});
        owners.push_back(c);
      }
    };
    add(coordinator_.get());
    for (auto& c : old_coordinators_) add(c.get());
    for (auto& a : agents_) add(a.child.get());
    ::poll(fds.data(), fds.size(), timeout_ms);
    const TimePoint now = Clock::now();
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child* c = owners[i];
      char buf[65536];
      for (;;) {
        const ssize_t n = ::read(c->fd, buf, sizeof(buf));
        if (n > 0) {
          c->pending.append(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n == 0) {
          ::close(c->fd);
          c->fd = -1;
        }
        break;
      }
      std::size_t nl;
      while ((nl = c->pending.find('\n')) != std::string::npos) {
        const std::string line = c->pending.substr(0, nl);
        c->pending.erase(0, nl + 1);
        if (!o_.log_dir.empty()) {
          if (!c->log) {
            c->log = std::make_unique<std::ofstream>(o_.log_dir + "/" + r_.name + "-" + c->name +
                                                     ".log");
          }
          *c->log << line << "\n";
        }
        if (line.rfind("soak step", 0) != 0) {
          c->last_lines.push_back(line);
          if (c->last_lines.size() > 12) c->last_lines.erase(c->last_lines.begin());
        }
        if (c == coordinator_.get()) {
          coordinator_line(line, now);
        } else if (c->name.rfind("coordinator", 0) == 0) {
          // a killed coordinator's last lines: nothing to learn from them
        } else {
          agent_line(*c, line, now);
        }
      }
    }
    for (auto& a : agents_) a.child->poll_exit();
    for (auto& c : old_coordinators_) c->poll_exit();
  }

  void coordinator_line(const std::string& line, TimePoint now) {
    static const std::regex view_re(
        R"(view epoch (\d+) \((\w+)\): (\d+) members, ring \[([^\]]*)\])");
    static const std::regex resumed_re(R"(member (\d+) \(.*\) resumed from)");
    std::smatch m;
    if (std::regex_search(line, m, resumed_re)) {
      const std::uint64_t id = std::stoull(m[1]);
      for (Fault& f : r_.faults) {
        if (f.kind != "coordinator" || f.recover || f.awaiting.erase(id) == 0) continue;
        if (f.awaiting.empty()) f.recover = seconds_between(f.at, now);
      }
      return;
    }
    if (!std::regex_search(line, m, view_re)) return;
    std::set<std::uint64_t> ids;
    std::istringstream ring(m[4].str());
    std::string tok;
    while (ring >> tok) ids.insert(std::stoull(tok.substr(0, tok.find('@'))));
    current_world_ = static_cast<int>(ids.size());
    // A view that removed a member nobody killed or froze (or that rebuilt the links) is a
    // view a link caused: with failover there should be none.
    if (!views_.empty() && !shutting_down_) {
      for (std::uint64_t id : views_.back().second) {
        if (ids.count(id)) continue;
        // A process that rejoined after an eviction carries a new member id: a fault on the
        // process counts for every id it had (it may die between joining and printing it).
        const bool victim = std::any_of(r_.faults.begin(), r_.faults.end(), [&](const Fault& f) {
          if (f.kind != "kill" && f.kind != "stop" && f.kind != "drain") return false;
          if (f.member == id) return true;
          for (const auto& a : agents_) {
            if (a.child->name != f.who) continue;
            const auto& had = a.child->members;
            return std::find(had.begin(), had.end(), id) != had.end();
          }
          return false;
        });
        if (!victim) {
          ++r_.link_views;
          r_.notes.push_back("view " + m[1].str() + " (" + m[2].str() + ") removed member " +
                             std::to_string(id) + ", neither killed nor frozen");
        }
      }
    }
    if (m[2].str() == "link_rebuild") {
      ++r_.link_views;
      r_.notes.push_back("view " + m[1].str() + " rebuilt the links");
    }
    views_.emplace_back(now, ids);
    for (Fault& f : r_.faults) {
      if (f.kind == "cut" || f.kind == "coordinator" || f.detect || now < f.at) continue;
      if (f.kind == "join") {
        if (f.member != 0 && ids.count(f.member)) f.detect = seconds_between(f.at, now);
      } else if (!ids.count(f.member)) {
        f.detect = seconds_between(f.at, now);
      }
    }
  }

  void agent_line(Child& c, const std::string& line, TimePoint now) {
    static const std::regex step_re(
        R"(^soak step (\d+) view (\d+) contributors ([0-9,]+) attempts (\d+) sha256 ([0-9a-f]{64}) (ok|WRONG)$)");
    static const std::regex member_re(R"(^soak member (\d+)$)");
    static const std::regex data_re(R"(member \d+ rank \d+ data [^ ]+:(\d+) metrics)");
    static const std::regex joined_re(R"(joined coordinator \S+ as member (\d+))");
    std::smatch m;
    if (std::regex_search(line, m, joined_re)) {
      // Known from the join on; its "soak member" line comes once its first view is up.
      const std::uint64_t id = std::stoull(m[1]);
      if (std::find(c.members.begin(), c.members.end(), id) == c.members.end()) {
        c.members.push_back(id);
      }
      return;
    }
    if (std::regex_search(line, m, data_re)) {
      c.data_port = std::stoi(m[1]);
      return;
    }
    if (std::regex_match(line, m, member_re)) {
      c.member = std::stoull(m[1]);
      if (std::find(c.members.begin(), c.members.end(), c.member) == c.members.end()) {
        c.members.push_back(c.member);
      }
      for (Fault& f : r_.faults) {
        if (f.kind != "join" || f.who != c.name || f.member != 0) continue;
        // The view admitting it went out before the joiner could print its id.
        f.member = c.member;
        for (const auto& [at, ids] : views_) {
          if (at >= f.at && ids.count(f.member)) {
            f.detect = seconds_between(f.at, at);
            break;
          }
        }
      }
      return;
    }
    if (!std::regex_match(line, m, step_re)) return;
    const long step = std::stol(m[1]);
    const std::uint64_t view = std::stoull(m[2]);
    const std::string contributors = m[3];
    const int attempts = std::stoi(m[4]);
    const std::string hash = m[5];
    if (m[6] != "ok") ++r_.wrong;
    last_progress_ = now;
    in_hang_ = false;
    auto [it, first] = steps_.emplace(step, StepRecord{hash, view, contributors, now});
    if (first) {
      r_.reruns += attempts - 1;
    } else if (it->second.hash != hash || it->second.view != view ||
               it->second.contributors != contributors) {
      ++r_.disagreements;
      r_.notes.push_back("step " + std::to_string(step) + ": " + c.name + " disagrees");
    }
    std::set<std::uint64_t> ids;
    std::size_t s = 0;
    while (s < contributors.size()) {
      const std::size_t comma = std::min(contributors.find(',', s), contributors.size());
      ids.insert(std::stoull(contributors.substr(s, comma - s)));
      s = comma + 1;
    }
    for (Fault& f : r_.faults) {
      if (f.kind == "cut" || f.kind == "coordinator" || f.recover || now < f.at) continue;
      if (f.kind == "join") {
        if (f.who == c.name) f.recover = seconds_between(f.at, now);
      } else if (f.who != c.name && !ids.count(f.member)) {
        f.recover = seconds_between(f.at, now);
      }
    }
  }

  void summarize() {
    long first = -1, last = -1, count = 0;
    for (const auto& [step, rec] : steps_) {
      if (rec.first_seen < start_) continue;
      if (first < 0) first = step;
      last = step;
      ++count;
    }
    r_.committed = count;
    r_.first_step = first;
    r_.last_step = last;
    // Gaps over everything seen: step numbers that no agent ever printed.
    if (!steps_.empty()) {
      r_.gaps =
          (steps_.rbegin()->first - steps_.begin()->first + 1) - static_cast<long>(steps_.size());
    }
  }

  void shutdown() {
    shutting_down_ = true;  // the drains that follow change views on purpose
    for (auto& a : agents_) {
      a.child->signal(SIGCONT);
      a.child->signal(SIGTERM);
    }
    const TimePoint deadline = Clock::now() + std::chrono::seconds(30);
    for (;;) {
      pump(20);
      bool all = true;
      for (auto& a : agents_) all = all && a.child->poll_exit();
      if (all || Clock::now() >= deadline) break;
    }
    for (auto& a : agents_) {
      if (!a.child->poll_exit()) {
        ++r_.unclean_exits;
        r_.notes.push_back(a.child->name + " did not exit within 30 s of SIGTERM");
      } else if (!a.child->killed && a.child->status != 0) {
        ++r_.unclean_exits;
        std::string tail;
        for (const auto& l : a.child->last_lines) tail += "\n      " + l;
        r_.notes.push_back(a.child->name + " exited with status " +
                           std::to_string(a.child->status) + "; its last lines:" + tail);
      }
    }
    if (coordinator_) {
      coordinator_->signal(SIGTERM);
      for (int i = 0; i < 100 && !coordinator_->poll_exit(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::remove(ready_.c_str());
    if (!journal_.empty()) std::remove(journal_.c_str());
  }

  const Options& o_;
  std::mt19937_64& rng_;
  PhaseResult r_;
  std::string ready_, endpoint_, secret_;
  std::vector<std::string> coordinator_args_;  // but --bind and --ready-file
  std::string journal_;                        // --control-faults: the coordinator's journal
  std::unique_ptr<Child> coordinator_;         // null only while a restart failed
  std::vector<std::unique_ptr<Child>> old_coordinators_;  // killed ones, and failed restarts
  int restarts_ = 0;
  std::vector<Agent> agents_;
  std::map<long, StepRecord> steps_;
  std::vector<std::pair<TimePoint, std::set<std::uint64_t>>> views_;
  TimePoint start_, last_progress_, next_fault_;
  bool in_hang_ = false;
  bool shutting_down_ = false;
  int current_world_ = 0;
};

// Draws the report's plot next to it (bench/plots/plot_results.py, PNG of the same name).
// The table is written first and stays, whatever happens here.
int plot_report(const std::string& md) {
  const char* argv[] = {TRIBUTARY_PLOT_RESULTS, "churn", md.c_str(), nullptr};
  pid_t pid = -1;
  if (const int e =
          ::posix_spawn(&pid, argv[0], nullptr, nullptr, const_cast<char**>(argv), environ);
      e != 0) {
    std::fprintf(stderr, "churn_bench: cannot run %s: %s\n", argv[0], std::strerror(e));
    return 1;
  }
  const TimePoint deadline = Clock::now() + std::chrono::seconds(120);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "churn_bench: %s took over 120 s; killed\n", argv[0]);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  std::fprintf(stderr, "churn_bench: the plot failed; the table is in %s\n", md.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tributary")
      o.tributary = next();
    else if (a == "--duration-s")
      o.duration_s = std::stod(next());
    else if (a == "--seed")
      o.seed = std::stoull(next());
    else if (a == "--delay-ms")
      o.delay_ms = std::stoi(next());
    else if (a == "--count")
      o.count = std::stol(next());
    else if (a == "--world")
      o.start_world = std::stoi(next());
    else if (a == "--out")
      o.out = next();
    else if (a == "--link-cuts")
      o.link_cuts = true;
    else if (a == "--control-faults")
      o.control_faults = true;
    else if (a == "--log-dir")
      o.log_dir = next();
    else if (a == "--phases") {
      o.phases.clear();
      std::istringstream in(next());
      std::string p;
      while (std::getline(in, p, ',')) o.phases.insert(p);
    } else {
      std::fprintf(
          stderr,
          "usage: churn_bench --tributary PATH [--duration-s 180] [--seed S] [--delay-ms 20] "
          "[--count 1048576] [--world 5] [--out FILE] [--phases free,churn,every10] "
          "[--link-cuts] [--control-faults] [--log-dir DIR]\n");
      return 2;
    }
  }
  if (o.tributary.empty()) {
    std::fprintf(stderr,
                 "churn_bench: --tributary PATH (the built tributary binary) is required\n");
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  std::mt19937_64 rng(o.seed);
  std::vector<PhaseResult> results;
  for (const std::string name : {"free", "churn", "every10"}) {
    if (!o.phases.count(name)) continue;
    std::fprintf(stderr, "churn_bench: phase %s (%.0f s)...\n", name.c_str(), o.duration_s);
    results.push_back(Phase(o, name, rng).run());
  }

  const std::string report = churn_report(o, results);
  std::fputs(report.c_str(), stdout);
  if (o.out.empty()) return 0;
  std::ofstream(o.out) << report;
  return plot_report(o.out);
}
