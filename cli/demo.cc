#include "cli/demo.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "cli/demo_artifacts.h"
#include "cli/demo_narrator.h"
#include "cli/ha_control_plane.h"
#include "cli/launcher.h"
#include "cli/view_history_poller.h"
#include "core/log.h"
#include "examples/training/batcher.h"
#include "examples/training/dataset.h"

namespace tributary::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A worker process: its number in the demo (1..), what the demo does to it, its output.
struct Agent {
  Agent(int n, ChildProcess p, int out_fd) : number(n), process(std::move(p)), fd(out_fd) {}
  int number = 0;
  ChildProcess process;
  int fd = -1;
  std::string pending;  // partial output line
  std::string role;     // "", "kill", "stop", "drain", "straggler", "joiner", "late"
  std::unique_ptr<std::ofstream> out_log;  // its stdout, events included
  bool finished = false;                   // exit seen and narrated
  // When it raised its own fault (@fault): the demo sees the death or the stop only when it
  // reaps or polls the process, possibly after the cluster has reacted.
  std::optional<std::int64_t> fault_unix_ms;
};

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'T';
}

// A human progress line starts with the global step: "   125     5    0.1234 ..." (the
// federated workload's table, which the demo relays as it is).
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
  void step(HaControlPlane& ha, long at, long max_step, Console& console) {
    if (replaced_ || max_step < at) return;
    if (killed_.empty()) {
      killed_ = ha.leader();
      if (killed_.empty() || !ha.kill(killed_)) {
        killed_.clear();
        return;
      }
      killed_at_ = steady_clock::now();
      console.line(">> step " + std::to_string(max_step) +
                   "  kill -9 of the leading coordinator " + killed_);
      return;
    }
    const std::string now = ha.leader();
    if (now.empty() || now == killed_) return;
    replaced_ = true;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "   .. coordinator %s leads now, %.0f ms after the kill; training goes on",
                  now.c_str(),
                  std::chrono::duration<double, std::milli>(steady_clock::now() - killed_at_)
                      .count());
    console.line(buf);
  }
  bool done() const { return replaced_; }
  const std::string& killed() const { return killed_; }

 private:
  std::string killed_;
  steady_clock::time_point killed_at_{};
  bool replaced_ = false;
};

std::vector<std::string> split_endpoints(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

bool has_faults(const DemoSpec& spec) {
  return spec.kill_at >= 0 || spec.stop_at >= 0 || spec.join_at >= 0 || spec.drain_at >= 0 ||
         spec.straggler_ms > 0 || spec.ha;
}

std::string schedule_default_faults(DemoSpec& spec, const TrainSpec& train) {
  // The run's length in steps with the starting world: faults at fixed fractions of it,
  // so a longer or shorter run shows them all.
  long steps = 0;
  auto all = training::load_digits(train.data_path.empty() ? training::default_digits_path()
                                                           : train.data_path);
  if (all) {
    if (auto split = training::split_train_test(*all); split) {
      const auto shards = training::shard_indices(
          split->train, static_cast<std::size_t>(spec.workers),
          train.label_sorted ? training::Sharding::kLabelSorted : training::Sharding::kIid,
          train.seed);
      steps = static_cast<long>(training::Batcher::common_batches_per_epoch(
                  shards, train.recipe.batch_size)) *
              train.recipe.epochs;
    }
  }
  if (spec.workers < 2 || steps < 200) {
    return "no faults: " + std::string(spec.workers < 2 ? "one worker has nobody to recover it"
                                                        : "the run is too short to show them") +
           " (--kill-at, --stop-at, --join-at, --drain-at pick them by hand)";
  }
  auto at = [&](double fraction) { return static_cast<long>(static_cast<double>(steps) * fraction); };
  spec.kill_at = at(0.16);
  spec.join_at = at(0.48);
  std::string plan = "faults on the way: kill -9 at step " + std::to_string(spec.kill_at);
  if (spec.workers >= 3) {
    spec.stop_at = at(0.30);
    spec.drain_at = at(0.64);
    char later[32];
    std::snprintf(later, sizeof(later), "%.1f", static_cast<double>(spec.stop_for_ms) / 1000.0);
    plan += ", SIGSTOP at " + std::to_string(spec.stop_at) + " (SIGCONT " + later + " s later)";
  }
  plan += ", a new worker at " + std::to_string(spec.join_at);
  if (spec.drain_at >= 0) plan += ", SIGTERM (drain) at " + std::to_string(spec.drain_at);
  return plan + " (--no-faults: a plain run)";
}

int run_demo(const DemoSpec& spec) {
  const Logger log("demo");
  auto run_dir = make_run_dir(spec.run_dir);
  if (!run_dir) {
    log.error(run_dir.status().to_string());
    return 2;
  }
  const std::string dir = *run_dir;
  Console console(dir + "/demo.txt");
  console.line("tributary demo: coordinator + " + std::to_string(spec.workers) +
               " worker processes on this machine");
  if (!spec.plan.empty()) console.line("demo: " + spec.plan);
  const std::string secret = random_secret();
  ::setenv("TRIBUTARY_SECRET", secret.c_str(), 1);
  const Deadline deadline = Deadline::after(std::chrono::seconds(spec.timeout_s));
  auto log_output = [&](const std::string& name) {
    return spec.verbose ? ChildOutput{} : ChildOutput{dir + "/" + name, dir + "/" + name};
  };
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
                                       Deadline::after(std::chrono::seconds(30)),
                                       spec.verbose ? "" : dir);
    if (!plane) {
      log.error(plane.status().to_string());
      return 1;
    }
    ha = std::move(plane).value();
    endpoint = ha->endpoints();
    console.line("demo: three coordinators " + endpoint + ", the leader is " + ha->leader());
  } else {
    coordinator = start_coordinator_process(spec.workers, &endpoint,
                                            Deadline::after(std::chrono::seconds(20)),
                                            coordinator_args, log_output("coordinator.log"));
    if (!coordinator) {
      log.error(coordinator.status().to_string());
      return 1;
    }
  }
  ViewHistoryPoller poller(split_endpoints(endpoint), secret, milliseconds(150),
                           milliseconds(1000));
  LeaderKill leader_kill;
  DemoNarrator narrator(spec.print_every, mono_us_now());
  const bool events = !spec.federated;

  std::vector<std::unique_ptr<Agent>> agents;
  auto show = [&](const std::vector<std::string>& lines) {
    for (const auto& l : lines) console.line(l);
  };
  auto spawn = [&](const std::string& role, std::vector<std::string> extra) -> bool {
    std::vector<std::string> argv = {self_executable(), "agent",      "--coordinator",
                                     endpoint,          "--workload",
                                     spec.federated ? "federated" : "train"};
    if (events) argv.push_back("--events");
    argv.insert(argv.end(), spec.agent_args.begin(), spec.agent_args.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    const int number = static_cast<int>(agents.size()) + 1;
    const std::string name = "worker-" + std::to_string(number);
    int fd = -1;
    auto child = ChildProcess::spawn_piped(argv, &fd, log_output(name + ".log"));
    if (!child) {
      log.error(child.status().to_string());
      return false;
    }
    auto a = std::make_unique<Agent>(number, std::move(*child), fd);
    a->role = role;
    a->out_log = std::make_unique<std::ofstream>(dir + "/" + name + ".out");
    show(narrator.worker_started(a->number, a->process.pid(), role == "joiner",
                                 narrator.latest_step(), mono_us_now(), unix_ms_now()));
    agents.push_back(std::move(a));
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
  {
    std::string pids;
    for (const auto& a : agents) pids += (pids.empty() ? "" : " ") + std::to_string(a->process.pid());
    console.line("demo: coordinator " + endpoint + ", workers 1-" + std::to_string(spec.workers) +
                 " (pids " + pids + ")");
  }
  if (events) console.line(DemoNarrator::table_header());

  long max_step = -1;
  // Once the cluster's rank 0 has printed its summary, training is over: workers still
  // around (a late rejoiner, say) get a grace period, then SIGTERM, then SIGKILL.
  steady_clock::time_point finished_at{};
  bool terminated_late = false;
  bool joined = false;
  bool drained = false;
  steady_clock::time_point continue_at{};
  bool stop_seen = false;
  bool continued = false;
  std::vector<std::string> hashes;  // from workers that finished training in the cluster
  long final_steps = -1;
  int failures = 0;

  auto handle_line = [&](Agent& a, const std::string& line) {
    if (a.out_log) *a.out_log << line << '\n';
    if (events) {
      if (auto ev = parse_event(line)) {
        if (const auto* s = std::get_if<StepEvent>(&*ev)) max_step = std::max(max_step, s->step);
        if (const auto* f = std::get_if<FaultEvent>(&*ev)) a.fault_unix_ms = f->unix_ms;
        show(narrator.event(a.number, *ev));
        return;
      }
    } else {
      max_step = std::max(max_step, progress_step(line));
    }
    if (line.rfind("summary: ", 0) == 0) {
      finished_at = steady_clock::now();
      narrator.training_finished();
    }
    const std::string key = "final: params sha256 ";
    const bool final_line = line.rfind(key, 0) == 0;
    if (final_line && line.find("drained") == std::string::npos) {
      hashes.push_back(line.substr(key.size(), 64));
      std::istringstream rest(line.substr(key.size() + 64));
      std::string word;
      long n = -1;
      if (rest >> word >> n && word == "steps") final_steps = n;
    }
    // With the narrated table the final lines are for the agreement check below; the
    // federated table is relayed as it is.
    if (!final_line || !events || spec.verbose) console.line(line);
  };
  auto narrate_exit = [&](Agent& a, int code) {
    if (a.finished) return;
    a.finished = true;
    if (a.role == "kill" && code == 128 + SIGKILL) {
      show(narrator.fault(FaultKind::kKill, a.number, a.process.pid(), mono_us_now(),
                          a.fault_unix_ms.value_or(unix_ms_now())));
      return;
    }
    if (a.role != "late") show(narrator.exited(a.number, code));
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Agent*> owners;
    for (auto& a : agents) {
      if (a->fd >= 0) {
        fds.push_back({a->fd, POLLIN, 0});
        owners.push_back(a.get());
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
    for (auto& a : agents) {
      if (a->fd >= 0 || a->finished) continue;
      if (auto code = a->process.wait(Deadline{steady_clock::now()})) narrate_exit(*a, *code);
    }
    for (const auto& change : poller.take()) show(narrator.view_change(change));
    // Fault injection driven by progress.
    if (ha) leader_kill.step(*ha, spec.kill_leader_at, max_step, console);
    if (spec.join_at >= 0 && !joined && max_step >= spec.join_at) {
      joined = true;
      if (!spawn("joiner", zone_args(spec.workers - 1, spec.workers, spec.zones))) return 1;
    }
    for (auto& a : agents) {
      if (a->role == "drain" && !drained && max_step >= spec.drain_at) {
        drained = true;
        show(narrator.fault(FaultKind::kDrain, a->number, a->process.pid(), mono_us_now(),
                            unix_ms_now()));
        a->process.signal(SIGTERM);
      }
      if (a->role == "stop" && !continued && !a->process.exited() &&
          is_stopped(a->process.pid())) {
        if (!stop_seen) {
          stop_seen = true;
          show(narrator.fault(FaultKind::kStop, a->number, a->process.pid(), mono_us_now(),
                              a->fault_unix_ms.value_or(unix_ms_now())));
          continue_at = steady_clock::now() + milliseconds(spec.stop_for_ms);
        } else if (steady_clock::now() >= continue_at) {
          continued = true;
          a->process.signal(SIGCONT);
          show(narrator.continued(a->number, mono_us_now()));
        }
      }
    }
    if (finished_at != steady_clock::time_point{} &&
        steady_clock::now() - finished_at > std::chrono::seconds(5)) {
      for (auto& a : agents) {
        if (a->fd < 0 || a->process.exited()) continue;
        if (!terminated_late) {
          console.line("demo: training is over; stopping worker " + std::to_string(a->number) +
                       " (pid " + std::to_string(a->process.pid()) + "), which is still around");
          a->role = "late";
          a->process.signal(SIGCONT);
          a->process.signal(SIGTERM);
        } else {
          a->process.signal(SIGKILL);
        }
      }
      if (terminated_late) finished_at = steady_clock::now();
      terminated_late = true;
    }
    if (deadline.passed()) {
      log.error("timed out after " + std::to_string(spec.timeout_s) + " s; stopping everything");
      failures = 1;
      break;
    }
  }
  for (auto& a : agents) {
    a->process.signal(SIGCONT);
    auto code =
        a->process.wait(deadline.passed() ? Deadline::after(std::chrono::seconds(5)) : deadline);
    if (!code) {
      a->process.signal(SIGKILL);
      ++failures;
      continue;
    }
    narrate_exit(*a, *code);
    const bool expected_death =
        (a->role == "kill" && *code == 128 + SIGKILL) || a->role == "late";
    if (*code != 0 && !expected_death) {
      log.logf(LogLevel::kError, "worker %d pid %d (%s) exited with status %d", a->number,
               a->process.pid(), a->role.empty() ? "worker" : a->role.c_str(), *code);
      ++failures;
    }
  }
  // The last view changes (a drain at the end, say), before the coordinator goes.
  poller.poll_once();
  poller.stop();
  for (const auto& change : poller.take()) show(narrator.view_change(change));
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
    console.line("demo: " + std::to_string(hashes.size()) +
                 " surviving workers hold bitwise-identical parameters (sha256 " +
                 hashes.front() + ", " + std::to_string(final_steps) + " steps)");
  } else if (distinct.size() > 1) {
    console.line("demo: DISAGREEMENT: " + std::to_string(hashes.size()) +
                 " surviving workers hold " + std::to_string(distinct.size()) +
                 " different parameter sets");
    ++failures;
  } else {
    console.line("demo: no worker finished training");
    ++failures;
  }
  show(narrator.summary());
  if (!narrator.all_handled()) {
    console.line("demo: some faults were not handled (NOT HANDLED above); the logs are in " +
                 dir);
    ++failures;
  }
  if (events) {
    if (Status s = write_run_tables(dir, narrator); !s) log.warn(s.to_string());
    auto png = draw_run_plot(dir);
    console.line(png ? "plot: " + *png : "plot: none (" + png.status().message() + ")");
  }
  console.line("run directory: " + dir + " (demo.txt, coordinator and worker logs" +
               std::string(events ? ", steps.csv, faults.csv" : "") + ")");
  return failures == 0 ? 0 : 1;
}

}  // namespace tributary::cli
