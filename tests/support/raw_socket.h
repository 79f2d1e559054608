// A raw TCP client for tests that play a misbehaving or plain peer: connect, send, read
// back, see whether the other side closed; every read and write has a bounded wait.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tributary::testing {

// A TCP connection to 127.0.0.1:port whose every read and write gives up after `timeout`.
class RawSocket {
 public:
  explicit RawSocket(int port,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    timeval tv{};
    tv.tv_sec = timeout.count() / 1000;
    tv.tv_usec = (timeout.count() % 1000) * 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(RawSocket&& o) noexcept : fd_(o.fd_), connected_(o.connected_) { o.fd_ = -1; }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool send_all(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  // True once the peer closed the connection (EOF or reset); false when it was still open
  // at the read timeout. Discards what it reads.
  bool closed_by_peer() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    }
  }
  // Exactly n bytes, or nullopt on EOF, error or timeout.
  std::optional<std::string> read_exact(std::size_t n) {
    std::string out(n, '\0');
    for (std::size_t got = 0; got < n;) {
      const ssize_t k = ::recv(fd_, out.data() + got, n - got, 0);
      if (k <= 0) return std::nullopt;
      got += static_cast<std::size_t>(k);
    }
    return out;
  }
  // Everything until the peer closes (or the read timeout).
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace tributary::testing
