#include "cli/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

extern char** environ;

namespace tributary::cli {

namespace {

void redirect(posix_spawn_file_actions_t* actions, int fd, const std::string& path) {
  if (path.empty()) return;
  posix_spawn_file_actions_addopen(actions, fd, path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
}

Status start(const std::vector<std::string>& argv, posix_spawn_file_actions_t* actions,
             pid_t* pid) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(pid, argv[0].c_str(), actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(actions);
  if (rc != 0) {
    return error(StatusCode::kInternal, "cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  return Status::ok();
}

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv,
                                         const ChildOutput& output) {
  if (argv.empty()) return error(StatusCode::kInvalidArgument, "empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  redirect(&actions, STDOUT_FILENO, output.stdout_path);
  redirect(&actions, STDERR_FILENO, output.stderr_path);
  pid_t pid = -1;
  TRIB_RETURN_IF_ERROR(start(argv, &actions, &pid));
  return ChildProcess(pid);
}

Result<ChildProcess> ChildProcess::spawn_piped(const std::vector<std::string>& argv, int* read_fd,
                                               const ChildOutput& output) {
  if (argv.empty()) return error(StatusCode::kInvalidArgument, "empty argv");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return error(StatusCode::kInternal, "pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  redirect(&actions, STDERR_FILENO, output.stderr_path);
  pid_t pid = -1;
  Status started = start(argv, &actions, &pid);
  ::close(fds[1]);
  if (!started) {
    ::close(fds[0]);
    return started;
  }
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  *read_fd = fds[0];
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), exit_status_(other.exit_status_) {
  other.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    this->~ChildProcess();
    pid_ = other.pid_;
    exit_status_ = other.exit_status_;
    other.pid_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_status_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

void ChildProcess::signal(int sig) const {
  if (pid_ > 0 && !exit_status_) ::kill(pid_, sig);
}

std::optional<int> ChildProcess::wait(Deadline deadline) {
  if (exit_status_ || pid_ <= 0) return exit_status_;
  // waitpid has no timeout; poll with a short, growing back-off (bounded by the deadline).
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_status_;
    }
    if (r < 0 && errno != EINTR) {
      exit_status_ = 255;
      return exit_status_;
    }
    if (deadline.passed()) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

std::string self_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "tributary";
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace tributary::cli
