#include "cli/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "core/auth.h"
#include "core/hash.h"
#include "core/log.h"

namespace tributary::cli {

std::string random_secret() { return to_hex(random_nonce()) + to_hex(random_nonce()); }

Result<ChildProcess> start_coordinator_process(int world_size, std::string* endpoint,
                                               Deadline deadline,
                                               const std::vector<std::string>& extra_args,
                                               const ChildOutput& output) {
  char dir_template[] = "/tmp/tributary-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) return error(StatusCode::kInternal, "mkdtemp failed");
  const std::string ready = std::string(dir) + "/coordinator.endpoint";
  std::vector<std::string> argv = {self_executable(),   "coordinator",  "--bind",
                                   "tcp://127.0.0.1:0", "--world-size", std::to_string(world_size),
                                   "--ready-file",      ready};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  TRIB_ASSIGN_OR_RETURN(auto child, ChildProcess::spawn(argv, output));
  // The coordinator writes the file atomically (rename) once it is bound.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::ifstream in(ready);
    std::string line;
    if (in && std::getline(in, line) && !line.empty()) {
      *endpoint = line;
      ::unlink(ready.c_str());
      ::rmdir(dir);
      return child;
    }
    if (auto code = child.wait(Deadline{std::chrono::steady_clock::now()}); code) {
      return error(StatusCode::kUnavailable, "the coordinator exited with status " +
                                                 std::to_string(*code) + " before binding");
    }
    if (deadline.passed())
      return error(StatusCode::kTimedOut, "the coordinator did not bind in time");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

std::vector<std::string> zone_args(int i, int n, int zones) {
  if (zones <= 1 || n <= 0) return {};
  return {"--zone", "zone-" + std::to_string(static_cast<long>(i) * zones / n)};
}

Result<std::vector<ChildProcess>> start_agents(int n, const std::string& endpoint,
                                               const std::vector<std::string>& agent_args,
                                               int zones) {
  std::vector<ChildProcess> agents;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> argv = {self_executable(), "agent", "--coordinator", endpoint};
    argv.insert(argv.end(), agent_args.begin(), agent_args.end());
    const auto zone = zone_args(i, n, zones);
    argv.insert(argv.end(), zone.begin(), zone.end());
    TRIB_ASSIGN_OR_RETURN(auto child, ChildProcess::spawn(argv));
    agents.push_back(std::move(child));
  }
  return agents;
}

int wait_all(std::vector<ChildProcess>& agents, Deadline deadline) {
  int first_failure = 0;
  for (auto& a : agents) {
    auto code = a.wait(deadline);
    if (!code) {
      Logger("launcher")
          .logf(LogLevel::kWarn, "agent pid %d did not finish in time; killing it", a.pid());
      a.signal(SIGKILL);
      code = a.wait(Deadline::after(std::chrono::seconds(5)));
      if (first_failure == 0) first_failure = 124;
      continue;
    }
    if (*code != 0 && first_failure == 0) first_failure = *code;
  }
  return first_failure;
}

}  // namespace tributary::cli
