// A real etcd for a test: its own data directory under the test's TempDir, its client and
// peer ports picked free (etcd cannot bind port 0 and report the port), started again on
// other ports when it loses the race for one. Debian's etcd-server (scripts/deps.sh);
// binary() is empty when it is not installed, and tests then skip saying so.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "tests/integration/process.h"

namespace tributary::integration {

class EtcdServer {
 public:
  // The etcd binary on PATH (or /usr/bin), or empty.
  static std::string binary() {
    std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
    path += ":/usr/bin:/usr/local/bin";
    std::size_t start = 0;
    while (start <= path.size()) {
      const std::size_t colon = std::min(path.find(':', start), path.size());
      const std::string candidate = path.substr(start, colon - start) + "/etcd";
      if (colon > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
      start = colon + 1;
    }
    return {};
  }

  // Starts etcd (bounded: a few attempts on fresh ports); url() is empty on failure, and
  // failure() says why.
  EtcdServer(const TempDir& dir, std::string name = "etcd") : dir_(dir), name_(std::move(name)) {
    for (int attempt = 0; attempt < 5 && url_.empty(); ++attempt) start(attempt);
  }

  // "http://127.0.0.1:PORT"
  const std::string& url() const { return url_; }
  const std::string& failure() const { return failure_; }
  Process& process() { return *process_; }

  // kill -9, then the same data directory and ports again (an etcd restart).
  bool restart() {
    process_->kill_all();
    return launch(client_port_, peer_port_, attempts_++);
  }

 private:
  void start(int attempt) {
    const int client = pick_free_port();
    const int peer = pick_free_port();
    if (client <= 0 || peer <= 0 || client == peer) {
      failure_ = "no free ports";
      return;
    }
    if (launch(client, peer, attempt)) {
      client_port_ = client;
      peer_port_ = peer;
    }
  }

  bool launch(int client, int peer, int attempt) {
    const std::string c = "http://127.0.0.1:" + std::to_string(client);
    const std::string p = "http://127.0.0.1:" + std::to_string(peer);
    process_.emplace(dir_, name_ + "." + std::to_string(attempt),
                     std::vector<std::string>{
                         binary(), "--name", name_, "--data-dir", dir_.file(name_ + ".data"),
                         "--listen-client-urls", c, "--advertise-client-urls", c,
                         "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                         "--initial-cluster", name_ + "=" + p, "--log-level", "warn"});
    // Ready once its health endpoint answers; its log (stderr) says when a port was taken.
    const bool up = poll_until(deadline_after(seconds(15)), [&] {
      if (process_->poll().has_value()) return true;
      return healthy(client);
    });
    if (up && !process_->exited()) {
      url_ = c;
      return true;
    }
    failure_ = "etcd did not start on ports " + std::to_string(client) + "/" +
               std::to_string(peer) + ":\n" + process_->err();
    process_->kill_all();
    url_.clear();
    return false;
  }

  // A TCP connect plus "GET /health" answered with "true".
  static bool healthy(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const std::string req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
        std::string response;
        char buf[1024];
        ssize_t n;
        while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) response.append(buf, n);
        ok = response.find("\"health\":\"true\"") != std::string::npos;
      }
    }
    ::close(fd);
    return ok;
  }

  const TempDir& dir_;
  std::string name_;
  std::string url_;
  std::string failure_;
  int client_port_ = 0;
  int peer_port_ = 0;
  int attempts_ = 10;
  std::optional<Process> process_;
};

}  // namespace tributary::integration
