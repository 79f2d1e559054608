// A tiny, bounded HTTP/1.0 GET over a plain socket, for talking to Prometheus and to the
// /metrics endpoints in the integration tests. HTTP/1.0 with "Connection: close" keeps
// the response simple: no chunked encoding, the body ends when the server closes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace tributary::integration {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET http://host:port<path>; nullopt if nothing (or no complete response) arrived
// within `timeout`.
inline std::optional<HttpResponse> http_get(
    const std::string& host, int port, const std::string& path,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto remaining_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<long long>(0, left.count()));
  };
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return std::nullopt;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) return std::nullopt;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return std::nullopt;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return std::nullopt;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host + ":" +
                              std::to_string(port) + "\r\nConnection: close\r\n\r\n";
  std::size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return std::nullopt;
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return std::nullopt;
    if (n > 0) sent += static_cast<std::size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return std::nullopt;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return std::nullopt;
    }
    raw.append(buf, static_cast<std::size_t>(n));
  }
  // "HTTP/1.x NNN reason\r\n headers \r\n\r\n body"
  const auto header_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 5, "HTTP/") != 0 || header_end == std::string::npos) return std::nullopt;
  const auto space = raw.find(' ');
  if (space == std::string::npos || space > header_end) return std::nullopt;
  HttpResponse r;
  r.status = std::atoi(raw.c_str() + space + 1);
  r.body = raw.substr(header_end + 4);
  return r;
}

// Percent-encodes a query-string value (RFC 3986 unreserved characters stay).
inline std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace tributary::integration
