// A child process started by the demo and bench launchers, with bounded waits: nothing
// the launcher does can hang past its deadline, and children are killed (SIGKILL) when
// their ChildProcess is destroyed without having exited.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::cli {

// Where a child's output goes: a path is opened for appending (created 0644); "" inherits
// the parent's stream.
struct ChildOutput {
  std::string stdout_path;
  std::string stderr_path;
};

class ChildProcess {
 public:
  // argv[0] is the program path.
  static Result<ChildProcess> spawn(const std::vector<std::string>& argv,
                                    const ChildOutput& output = {});
  // Like spawn(), with the child's stdout connected to a pipe; *read_fd gets the read end
  // (non-blocking, close-on-exec), owned by the caller. output.stdout_path is ignored.
  static Result<ChildProcess> spawn_piped(const std::vector<std::string>& argv, int* read_fd,
                                          const ChildOutput& output = {});
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // The exit status (exit code, or 128 + signal) once the child has exited; nullopt if it
  // is still running at the deadline.
  std::optional<int> wait(Deadline deadline);
  bool exited() const { return exit_status_.has_value(); }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

// Path of the running executable (/proc/self/exe), for re-executing subcommands.
std::string self_executable();

}  // namespace tributary::cli
