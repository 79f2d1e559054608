#include "cli/demo.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli/ha_control_plane.h"
#include "cli/launcher.h"
#include "core/log.h"

namespace tributary::cli {
namespace {

struct Agent {
  ChildProcess process;
  int fd = -1;
  std::string pending;  // partial output line
  std::string role;     // "", "kill", "stop", "drain", "straggler", "joiner"
  bool finished = false;
};

bool is_stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'T';
}

// A progress line starts with the global step: "   125     5    0.1234 ...".
long progress_step(const std::string& line) {
  std::istringstream in(line);
  long step = -1;
  if (!(in >> step)) return -1;
  double loss = 0;
  long epoch = 0;
  if (!(in >> epoch >> loss)) return -1;
  return step;
}

// `--ha`: kills the leading coordinator once training reaches a step, then reports when
// a standby leads.
class LeaderKill {
 public:
  void step(HaControlPlane& ha, long at, long max_step) {
    if (replaced_ || max_step < at) return;
    if (killed_.empty()) {
      killed_ = ha.leader();
      if (killed_.empty() || !ha.kill(killed_)) {
        killed_.clear();
        return;
      }
      killed_at_ = std::chrono::steady_clock::now();
      std::printf("demo: step %ld: kill -9 of the leading coordinator %s\n", max_step,
                  killed_.c_str());
      return;
    }
    const std::string now = ha.leader();
    if (now.empty() || now == killed_) return;
    replaced_ = true;
    std::printf(
        "demo: coordinator %s leads now, %.0f ms after the kill; training goes on\n", now.c_str(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed_at_)
            .count());
  }
  bool done() const { return replaced_; }
  const std::string& killed() const { return killed_; }

 private:
  std::string killed_;
  std::chrono::steady_clock::time_point killed_at_{};
  bool replaced_ = false;
};

}  // namespace

int run_demo(const DemoSpec& spec) {
  const Logger log("demo");
  const std::string secret = random_secret();
  ::setenv("TRIBUTARY_SECRET", secret.c_str(), 1);
  const Deadline deadline = Deadline::after(std::chrono::seconds(spec.timeout_s));
  std::string endpoint;
  std::vector<std::string> coordinator_args = spec.coordinator_args;
  if (spec.straggler_ms > 0) {
    // Short enough that the evicted straggler is seen trying again within the demo.
    coordinator_args.insert(coordinator_args.end(), {"--straggler-cooldown-s", "5"});
  }
  Result<ChildProcess> coordinator = error(StatusCode::kUnavailable, "replicated");
  std::unique_ptr<HaControlPlane> ha;
  if (spec.ha) {
    auto plane = HaControlPlane::start(spec.workers, 3, coordinator_args,
                                       Deadline::after(std::chrono::seconds(30)));
    if (!plane) {
      log.error(plane.status().to_string());
      return 1;
    }
    ha = std::move(plane).value();
    endpoint = ha->endpoints();
    std::printf("demo: three coordinators %s, the leader is %s\n", endpoint.c_str(),
                ha->leader().c_str());
  } else {
    coordinator = start_coordinator_process(
        spec.workers, &endpoint, Deadline::after(std::chrono::seconds(20)), coordinator_args);
    if (!coordinator) {
      log.error(coordinator.status().to_string());
      return 1;
    }
  }
  LeaderKill leader_kill;

  std::vector<Agent> agents;
  auto spawn = [&](const std::string& role, std::vector<std::string> extra) -> bool {
    std::vector<std::string> argv = {self_executable(), "agent",      "--coordinator",
                                     endpoint,          "--workload",
                                     spec.federated ? "federated" : "train"};
    argv.insert(argv.end(), spec.agent_args.begin(), spec.agent_args.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    int fd = -1;
    auto child = ChildProcess::spawn_piped(argv, &fd);
    if (!child) {
      log.error(child.status().to_string());
      return false;
    }
    agents.push_back(Agent{std::move(*child), fd, "", role, false});
    return true;
  };
  // Distinct victims, from the last worker backwards.
  int next_victim = spec.workers - 1;
  auto victim = [&] { return std::max(0, next_victim--); };
  std::map<int, std::pair<std::string, std::vector<std::string>>> roles;
  if (spec.kill_at >= 0) roles[victim()] = {"kill", {"--kill-at", std::to_string(spec.kill_at)}};
  if (spec.stop_at >= 0) roles[victim()] = {"stop", {"--stop-at", std::to_string(spec.stop_at)}};
  if (spec.drain_at >= 0) roles[victim()] = {"drain", {}};
  if (spec.straggler_ms > 0) {
    roles[victim()] = {"straggler", {"--slow-ms", std::to_string(spec.straggler_ms)}};
  }
  for (int i = 0; i < spec.workers; ++i) {
    auto it = roles.find(i);
    std::vector<std::string> extra = zone_args(i, spec.workers, spec.zones);
    if (it != roles.end())
      extra.insert(extra.end(), it->second.second.begin(), it->second.second.end());
    if (!spawn(it == roles.end() ? "" : it->second.first, extra)) return 1;
  }

  long max_step = -1;
  // Once the cluster's rank 0 has printed its summary, training is over: workers still
  // around (a late rejoiner, say) get a grace period, then SIGTERM, then SIGKILL.
  std::chrono::steady_clock::time_point finished_at{};
  bool terminated_late = false;
  bool joined = false;
  bool drained = false;
  std::chrono::steady_clock::time_point continue_at{};
  bool continued = false;
  std::vector<std::string> hashes;  // from workers that finished training in the cluster
  int failures = 0;

  auto handle_line = [&](Agent& a, const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    const long step = progress_step(line);
    if (step > max_step) max_step = step;
    if (line.rfind("summary: ", 0) == 0) finished_at = std::chrono::steady_clock::now();
    const std::string key = "final: params sha256 ";
    if (line.rfind(key, 0) == 0 && line.find("drained") == std::string::npos) {
      hashes.push_back(line.substr(key.size(), 64));
    }
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Agent*> owners;
    for (auto& a : agents) {
      if (a.fd >= 0) {
        fds.push_back({a.fd, POLLIN, 0});
        owners.push_back(&a);
      }
    }
    if (fds.empty()) break;
    ::poll(fds.data(), fds.size(), 50);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Agent& a = *owners[i];
      char buf[4096];
      const ssize_t n = ::read(a.fd, buf, sizeof(buf));
      if (n > 0) {
        a.pending.append(buf, static_cast<std::size_t>(n));
        std::size_t nl;
        while ((nl = a.pending.find('\n')) != std::string::npos) {
          handle_line(a, a.pending.substr(0, nl));
          a.pending.erase(0, nl + 1);
        }
      } else if (n == 0) {
        if (!a.pending.empty()) handle_line(a, a.pending);
        ::close(a.fd);
        a.fd = -1;
      }
    }
    // Fault injection driven by progress.
    if (ha) leader_kill.step(*ha, spec.kill_leader_at, max_step);
    if (spec.join_at >= 0 && !joined && max_step >= spec.join_at) {
      joined = true;
      std::printf("demo: step %ld: starting a new worker (it joins at the next step boundary)\n",
                  max_step);
      if (!spawn("joiner", zone_args(spec.workers - 1, spec.workers, spec.zones))) return 1;
    }
    for (auto& a : agents) {
      if (a.role == "drain" && !drained && max_step >= spec.drain_at) {
        drained = true;
        std::printf("demo: step %ld: SIGTERM to worker pid %d (drain)\n", max_step,
                    a.process.pid());
        a.process.signal(SIGTERM);
      }
      if (a.role == "stop" && !continued && !a.process.exited() && is_stopped(a.process.pid())) {
        if (continue_at == std::chrono::steady_clock::time_point{}) {
          std::printf("demo: worker pid %d is stopped (SIGSTOP); SIGCONT in %ld ms\n",
                      a.process.pid(), spec.stop_for_ms);
          continue_at =
              std::chrono::steady_clock::now() + std::chrono::milliseconds(spec.stop_for_ms);
        } else if (std::chrono::steady_clock::now() >= continue_at) {
          continued = true;
          std::printf("demo: SIGCONT to worker pid %d\n", a.process.pid());
          a.process.signal(SIGCONT);
        }
      }
    }
    if (finished_at != std::chrono::steady_clock::time_point{} &&
        std::chrono::steady_clock::now() - finished_at > std::chrono::seconds(5)) {
      for (auto& a : agents) {
        if (a.fd < 0 || a.process.exited()) continue;
        if (!terminated_late) {
          std::printf("demo: training is over; stopping worker pid %d that is still around\n",
                      a.process.pid());
          a.role = "late";
          a.process.signal(SIGCONT);
          a.process.signal(SIGTERM);
        } else {
          a.process.signal(SIGKILL);
        }
      }
      if (terminated_late) finished_at = std::chrono::steady_clock::now();
      terminated_late = true;
    }
    if (deadline.passed()) {
      log.error("timed out after " + std::to_string(spec.timeout_s) + " s; stopping everything");
      failures = 1;
      break;
    }
  }
  for (auto& a : agents) {
    a.process.signal(SIGCONT);
    auto code =
        a.process.wait(deadline.passed() ? Deadline::after(std::chrono::seconds(5)) : deadline);
    if (!code) {
      a.process.signal(SIGKILL);
      ++failures;
      continue;
    }
    const bool expected_death = (a.role == "kill" && *code == 128 + SIGKILL) || a.role == "late";
    if (*code != 0 && !expected_death) {
      log.logf(LogLevel::kError, "worker pid %d (%s) exited with status %d", a.process.pid(),
               a.role.empty() ? "worker" : a.role.c_str(), *code);
      ++failures;
    }
  }
  if (coordinator) {
    coordinator->signal(SIGTERM);
    if (!coordinator->wait(Deadline::after(std::chrono::seconds(10)))) coordinator->signal(SIGKILL);
  }
  ha.reset();
  if (spec.ha && !leader_kill.done()) {
    log.error("the leading coordinator was never replaced (killed: " +
              std::string(leader_kill.killed().empty() ? "no" : "yes") + ")");
    ++failures;
  }

  const std::set<std::string> distinct(hashes.begin(), hashes.end());
  if (distinct.size() == 1) {
    std::printf("demo: %zu surviving workers hold bitwise-identical parameters (sha256 %.16s...)\n",
                hashes.size(), hashes.front().c_str());
  } else if (distinct.size() > 1) {
    std::printf("demo: DISAGREEMENT: %zu surviving workers hold %zu different parameter sets\n",
                hashes.size(), distinct.size());
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace tributary::cli
