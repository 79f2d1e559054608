// Real processes for the multi-process integration tests: spawn the built `tributary`
// binary with its stdout and stderr captured in files, wait for it with a deadline, poll
// its logs for a line, and kill it (with everything it started) when the guard goes out
// of scope, so a failed assertion never leaks processes into the next test.
//
// Every wait here is bounded and polls a condition; nothing sleeps a fixed time to let an
// event happen.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tributary::integration {

using SteadyTime = std::chrono::steady_clock::time_point;
using std::chrono::milliseconds;
using std::chrono::seconds;

#ifndef TRIBUTARY_BIN
#error "TRIBUTARY_BIN must name the built tributary binary"
#endif
inline std::string tributary_bin() { return TRIBUTARY_BIN; }

inline SteadyTime deadline_after(std::chrono::steady_clock::duration d) {
  return std::chrono::steady_clock::now() + d;
}

// Polls `done` with a short, growing pause until it holds or the deadline passes.
inline bool poll_until(SteadyTime deadline, const std::function<bool()>& done) {
  auto pause = milliseconds(2);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(100));
  }
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/tributary-integ-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (std::getenv("TRIBUTARY_KEEP_TEST_DIRS") == nullptr) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// One child process in a process group of its own, so that killing the group also kills
// what it started (`tributary check`'s coordinator and agents). The kernel kills the child
// if this test process dies first (its own children, not grandchildren, are covered).
// stdin is /dev/null; stdout and stderr go to <dir>/<name>.out/.err. The environment is
// ours without TRIBUTARY_* variables, plus `env`.
class Process {
 public:
  Process(const TempDir& dir, std::string name, std::vector<std::string> argv,
          const std::vector<std::string>& env = {})
      : name_(std::move(name)),
        out_path_(dir.file(name_ + ".out")),
        err_path_(dir.file(name_ + ".err")),
        argv_(std::move(argv)) {
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TRIBUTARY_", 10) != 0) envs.emplace_back(*e);
    }
    envs.insert(envs.end(), env.begin(), env.end());
    std::vector<char*> args, envp;
    for (auto& a : argv_) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);

    // fork + exec rather than posix_spawn for PR_SET_PDEATHSIG: if this test binary is
    // killed (ctest's timeout sends SIGKILL, so no destructor runs) its children die too.
    // Between fork and exec the child only makes async-signal-safe calls.
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || err < 0) ::_exit(127);
      ::dup2(in, STDIN_FILENO);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    // Also from this side, so kill(-pid) works even before the child ran setpgid.
    ::setpgid(pid, pid);
    pid_ = pid;
  }

  ~Process() { kill_all(); }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  bool exited() const { return status_.has_value(); }
  std::string out() const { return read_file(out_path_); }
  std::string err() const { return read_file(err_path_); }
  std::string command_line() const {
    std::string s;
    for (const auto& a : argv_) s += (s.empty() ? "" : " ") + a;
    return s;
  }
  // Both logs, labelled: for assertion messages.
  std::string dump() const {
    return "---- " + name_ + ": " + command_line() + "\n---- stdout:\n" + out() + "---- stderr:\n" +
           err();
  }

  void signal(int sig) const {
    if (pid_ > 0 && !status_) ::kill(pid_, sig);
  }

  // Non-blocking: the exit status (code, or 128 + signal) if it has exited.
  std::optional<int> poll() {
    if (status_ || pid_ <= 0) return status_;
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_)
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    else if (r < 0 && errno != EINTR)
      status_ = 255;
    return status_;
  }

  // The exit status, or nullopt if it is still running at the deadline.
  std::optional<int> wait_until(SteadyTime deadline) {
    poll_until(deadline, [&] { return poll().has_value(); });
    return status_;
  }

  // Polls stderr (or stdout) until `pattern` matches somewhere; returns the match and its
  // groups ([0] is the whole match), or nullopt at the deadline or when the process
  // exited without printing it.
  std::optional<std::vector<std::string>> wait_for_line(const std::regex& pattern,
                                                        SteadyTime deadline,
                                                        bool on_stdout = false) {
    std::optional<std::vector<std::string>> found;
    poll_until(deadline, [&] {
      const bool gone = poll().has_value();
      const std::string text = on_stdout ? out() : err();
      std::smatch m;
      if (std::regex_search(text, m, pattern)) {
        found.emplace();
        for (const auto& g : m) found->push_back(g.str());
        return true;
      }
      return gone;
    });
    return found;
  }

  // SIGKILL to the whole process group (children included), then reap.
  void kill_all() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    if (!status_) {
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
  }

 private:
  std::string name_;
  std::string out_path_;
  std::string err_path_;
  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// A TCP port on 127.0.0.1 that nobody listened on a moment ago, for programs (Prometheus)
// that cannot report the port they bound. Callers retry if the program loses the race.
inline int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// `tributary coordinator` on an ephemeral port; endpoint() is read from its ready file.
class CoordinatorProcess {
 public:
  CoordinatorProcess(const TempDir& dir, const std::string& name, const std::string& secret,
                     int world_size, const std::vector<std::string>& extra = {})
      : ready_(dir.file(name + ".endpoint")) {
    std::vector<std::string> argv = {
        tributary_bin(), "coordinator", "--bind",       "tcp://127.0.0.1:0",
        "--ready-file",  ready_,        "--world-size", std::to_string(world_size),
        "--secret",      secret};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process.emplace(dir, name, argv);
  }

  // Waits (bounded) for the ready file; empty if the coordinator did not bind in time.
  std::string wait_ready(SteadyTime deadline) {
    poll_until(deadline, [&] {
      std::ifstream in(ready_);
      std::string line;
      if (in && std::getline(in, line) && !line.empty()) endpoint_ = line;
      return !endpoint_.empty() || process->poll().has_value();
    });
    return endpoint_;
  }
  const std::string& endpoint() const { return endpoint_; }
  // "tcp://127.0.0.1:40123" -> 40123
  int port() const { return std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1)); }

  std::optional<Process> process;

 private:
  std::string ready_;
  std::string endpoint_;
};

// argv of `tributary agent` joining `endpoint` with `secret`, plus `extra`.
inline std::vector<std::string> agent_argv(const std::string& endpoint, const std::string& secret,
                                           const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {tributary_bin(), "agent", "--coordinator", endpoint,
                                   "--secret",      secret,  "--data-port",   "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// The line each agent prints once its links are up (agent/worker.cc), bare or as a
// core/log.h text record (time, level, and member= / epoch= before the colon):
//   tributary[agent]: member M rank R data HOST:PORT metrics PORT
//   2026-11-23T05:40:36.123Z info tributary[agent] member=w3 epoch=1: member M rank R ...
inline const std::regex& agent_ready_line() {
  static const std::regex re(
      R"(tributary\[agent\][^\n]*?: member (\d+) rank (\d+) data ([0-9.]+):(\d+) metrics (\d+))");
  return re;
}

}  // namespace tributary::integration
