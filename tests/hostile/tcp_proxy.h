// An attacker on the path (or a faulty network): a TCP proxy that forwards one client's
// connection to a target and can write bytes of its own into the client-to-target
// direction, between the client's writes (so at a message boundary when the client writes
// whole messages), or flip one bit of that direction at a given offset.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace tributary::hostile {

class TcpProxy {
 public:
  // Listens on `listen_host` (an IPv4 address; another loopback address lets the proxy
  // take the port its target listens on) at an ephemeral port, and forwards to
  // 127.0.0.1:target_port (0: the port the proxy got, for a target started after it).
  explicit TcpProxy(int target_port, const char* listen_host = "127.0.0.1")
      : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, listen_host, &a.sin_addr);
    socklen_t len = sizeof a;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd_, 16);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (target_port_ == 0) target_port_ = port_;
    thread_ = std::thread([this] { run(); });
  }
  ~TcpProxy() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  // Bytes written into the client-to-target stream at the next boundary between the
  // client's writes.
  void inject(std::string bytes) {
    std::lock_guard lock(mu_);
    pending_ += std::move(bytes);
  }
  // Flips a bit of the byte at `offset` of the first connection's client-to-target stream.
  void corrupt_at(std::uint64_t offset) { corrupt_at_ = offset; }
  bool corrupted() const { return corrupted_; }
  int connections() const { return connections_; }
  bool injected() const { return injected_; }

 private:
  bool forward(int from, int to, bool upstream) {
    char buf[65536];
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) return false;
    if (upstream && connections_ == 1 && !corrupted_) {
      const std::uint64_t at = corrupt_at_;
      if (at >= upstream_bytes_ && at < upstream_bytes_ + static_cast<std::uint64_t>(n)) {
        buf[at - upstream_bytes_] ^= 0x10;
        corrupted_ = true;
      }
      upstream_bytes_ += static_cast<std::uint64_t>(n);
    }
    return send_all(to, buf, static_cast<std::size_t>(n));
  }
  static bool send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }

  int connect_target() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(target_port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // One connection at a time (the agent's; it reconnects through us after a drop).
  void run() {
    int client = -1;
    int target = -1;
    while (!stop_) {
      pollfd fds[3] = {{listen_fd_, POLLIN, 0}, {client, POLLIN, 0}, {target, POLLIN, 0}};
      if (::poll(fds, 3, 20) < 0) continue;
      if (fds[0].revents & POLLIN) {
        const int c = ::accept(listen_fd_, nullptr, nullptr);
        if (c >= 0) {
          if (client >= 0) ::close(client);
          if (target >= 0) ::close(target);
          client = c;
          target = connect_target();
          ++connections_;
        }
      }
      if (client < 0 || target < 0) continue;
      bool ok = true;
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ok = forward(client, target, true);
        std::string extra;
        {
          std::lock_guard lock(mu_);
          extra.swap(pending_);
        }
        if (ok && !extra.empty()) {
          ok = ::send(target, extra.data(), extra.size(), MSG_NOSIGNAL) ==
               static_cast<ssize_t>(extra.size());
          injected_ = true;
        }
      }
      if (ok && (fds[2].revents & (POLLIN | POLLHUP | POLLERR)))
        ok = forward(target, client, false);
      if (!ok) {
        ::close(client);
        ::close(target);
        client = target = -1;
      }
    }
    if (client >= 0) ::close(client);
    if (target >= 0) ::close(target);
  }

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string pending_;
  std::atomic<int> connections_{0};
  std::atomic<bool> injected_{false};
  std::atomic<std::uint64_t> corrupt_at_{~std::uint64_t{0}};
  std::uint64_t upstream_bytes_ = 0;  // proxy thread only
  std::atomic<bool> corrupted_{false};
};

}  // namespace tributary::hostile
