#include "core/metrics_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <thread>
#include <vector>

#include "core/log_limiter.h"

namespace tributary {
namespace {

using std::chrono::milliseconds;

constexpr Duration kFirstBackoff = milliseconds(50);
constexpr Duration kMaxBackoff = milliseconds(1000);

struct Connection {
  int fd = -1;
  TimePoint deadline{};
  std::string request;  // bytes read so far
  std::string response;
  std::size_t sent = 0;
  bool responding() const { return !response.empty(); }
};

std::string http_response(int code, std::string_view reason, std::string_view type,
                          const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) + " " + std::string(reason) +
         "\r\nContent-Type: " + std::string(type) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

// "HOST:PORT" or "[V6]:PORT" into host and port; false when it is neither.
bool split_host_port(const std::string& bind, std::string& host, std::string& port) {
  const auto colon = bind.rfind(':');
  if (colon == std::string::npos || colon + 1 == bind.size()) return false;
  host = bind.substr(0, colon);
  port = bind.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return !host.empty() && port.find_first_not_of("0123456789") == std::string::npos;
}

Result<int> listen_on(const std::string& bind) {
  std::string host, port;
  if (!split_host_port(bind, host, port))
    return error(StatusCode::kInvalidArgument, "metrics address '" + bind + "' is not HOST:PORT");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return error(StatusCode::kInvalidArgument,
                 "metrics address '" + bind + "': " + ::gai_strerror(rc));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return error(StatusCode::kUnavailable, "cannot serve metrics on " + bind + ": " + why);
}

std::uint16_t bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(int listen_fd, int stop_fd, std::function<std::string()> render, Logger log,
       MetricsServerOptions options)
      : listen_fd_(listen_fd),
        stop_fd_(stop_fd),
        port_(bound_port(listen_fd)),
        render_(std::move(render)),
        log_(std::move(log)),
        options_(options) {}
  ~Impl() {
    stop();
    for (auto& c : connections_) ::close(c.fd);
    ::close(listen_fd_);
    ::close(stop_fd_);
  }

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    if (!thread_.joinable()) return;
    const std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  using Connections = std::list<Connection>;

  void run();
  void accept_all(TimePoint now);
  // Closes the oldest connection still waiting for its request; false if there is none.
  bool evict_oldest_waiting(std::string_view why, TimePoint now);
  void read_from(Connections::iterator c, TimePoint now);
  // false: the connection is done (answered in full, or broken).
  bool write_to(Connection& c);
  std::string answer(const std::string& request);
  Connections::iterator close(Connections::iterator c) {
    ::close(c->fd);
    return connections_.erase(c);
  }
  void refuse(std::string_view kind, const std::string& line, TimePoint now) {
    refusals_.log(log_, LogLevel::kWarn, kind, line, now);
  }

  int listen_fd_;
  int stop_fd_;
  std::uint16_t port_;
  std::function<std::string()> render_;
  Logger log_;
  MetricsServerOptions options_;
  LogLimiter refusals_;
  Connections connections_;  // in accept order: the front is the oldest
  TimePoint listen_paused_until_{};
  Duration backoff_ = kFirstBackoff;
  std::thread thread_;
};

void MetricsServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<Connections::iterator> polled;
  for (;;) {
    TimePoint now = std::chrono::steady_clock::now();
    refusals_.flush(log_, LogLevel::kWarn, now);
    for (auto c = connections_.begin(); c != connections_.end();) {
      if (now < c->deadline) {
        ++c;
        continue;
      }
      refuse("timeout",
             "closed a /metrics connection that did not " +
                 std::string(c->responding() ? "take its response" : "send its request") +
                 " in time",
             now);
      c = close(c);
    }
    fds.assign({{stop_fd_, POLLIN, 0}});
    polled.clear();
    const bool listening = now >= listen_paused_until_;
    if (listening) fds.push_back({listen_fd_, POLLIN, 0});
    TimePoint wake = listening ? now + kMaxBackoff : listen_paused_until_;
    for (auto c = connections_.begin(); c != connections_.end(); ++c) {
      fds.push_back({c->fd, static_cast<short>(c->responding() ? POLLOUT : POLLIN), 0});
      polled.push_back(c);
      wake = std::min(wake, c->deadline);
    }
    const auto wait = std::chrono::duration_cast<milliseconds>(wake - now + milliseconds(1));
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(0, wait.count()))) <
        0) {
      if (errno == EINTR) continue;
      log_.error(std::string("metrics server: poll failed: ") + std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    now = std::chrono::steady_clock::now();
    const std::size_t first = listening ? 2 : 1;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      const short ev = fds[first + i].revents;
      if (ev == 0) continue;
      auto c = polled[i];
      if (c->responding()) {
        if (!write_to(*c)) close(c);
      } else {
        read_from(c, now);
      }
    }
    if (listening && fds[1].revents != 0) accept_all(now);
  }
}

void MetricsServer::Impl::accept_all(TimePoint now) {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: spinning on the listener would not make any. Make room and
        // leave it alone for a while.
        evict_oldest_waiting("to free a file descriptor", now);
        listen_paused_until_ = now + backoff_;
        refuse("accept",
               "metrics server cannot accept (" + std::string(std::strerror(errno)) +
                   "): backing off for " +
                   std::to_string(std::chrono::duration_cast<milliseconds>(backoff_).count()) +
                   " ms",
               now);
        backoff_ = std::min(backoff_ * 2, kMaxBackoff);
      }
      return;  // EAGAIN: accepted everything waiting
    }
    backoff_ = kFirstBackoff;
    if (connections_.size() >= options_.max_connections &&
        !evict_oldest_waiting("to admit a new one", now)) {
      ::close(fd);
      continue;
    }
    connections_.push_back({fd, now + options_.request_timeout, {}, {}, 0});
  }
}

bool MetricsServer::Impl::evict_oldest_waiting(std::string_view why, TimePoint now) {
  for (auto c = connections_.begin(); c != connections_.end(); ++c) {
    if (c->responding()) continue;
    close(c);
    refuse("evict",
           "closed the oldest /metrics connection still waiting for its request " +
               std::string(why) + " (" + std::to_string(options_.max_connections) +
               " connections at most)",
           now);
    return true;
  }
  return false;
}

void MetricsServer::Impl::read_from(Connections::iterator c, TimePoint now) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close(c);  // the client went away before asking anything
      return;
    }
    if (n < 0) return;
    c->request.append(buf, static_cast<std::size_t>(n));
    const bool complete = c->request.find("\r\n\r\n") != std::string::npos ||
                          c->request.find("\n\n") != std::string::npos;
    if (!complete && c->request.size() <= options_.max_request_bytes) continue;
    if (!complete) {
      refuse("oversized",
             "closed a /metrics connection whose request exceeds " +
                 std::to_string(options_.max_request_bytes) + " bytes",
             now);
      c->response = http_response(431, "Request Header Fields Too Large", "text/plain", "");
    } else {
      c->response = answer(c->request);
    }
    c->request.clear();
    c->deadline = now + options_.response_timeout;
    if (!write_to(*c)) close(c);
    return;
  }
}

bool MetricsServer::Impl::write_to(Connection& c) {
  while (c.sent < c.response.size()) {
    const ssize_t n = ::send(c.fd, c.response.data() + c.sent, c.response.size() - c.sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.sent += static_cast<std::size_t>(n);
  }
  return false;  // answered in full: close
}

std::string MetricsServer::Impl::answer(const std::string& request) {
  const auto line_end = request.find_first_of("\r\n");
  const std::string line = request.substr(0, line_end);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0)
    return http_response(400, "Bad Request", "text/plain", "not an HTTP request\n");
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (path != "/metrics") return http_response(404, "Not Found", "text/plain", "try /metrics\n");
  if (method != "GET") return http_response(405, "Method Not Allowed", "text/plain", "GET only\n");
  return http_response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_());
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& bind,
                                                            std::function<std::string()> render,
                                                            Logger log,
                                                            MetricsServerOptions options) {
  if (options.max_connections < 1 || options.max_request_bytes < 64) {
    return error(StatusCode::kInvalidArgument,
                 "metrics server: max_connections >= 1 and max_request_bytes >= 64 required");
  }
  TRIB_ASSIGN_OR_RETURN(const int listen_fd, listen_on(bind));
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    const std::string why = std::strerror(errno);
    ::close(listen_fd);
    return error(StatusCode::kInternal, "metrics server: eventfd failed: " + why);
  }
  auto impl =
      std::make_unique<Impl>(listen_fd, stop_fd, std::move(render), std::move(log), options);
  impl->start();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() = default;
std::uint16_t MetricsServer::port() const { return impl_->port(); }
void MetricsServer::stop() { impl_->stop(); }

}  // namespace tributary
