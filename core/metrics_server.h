// A small HTTP server for Prometheus's /metrics scrapes that slow or many clients cannot
// starve (docs/security.md).
//
// Why not CivetWeb (prometheus-cpp's exposer): it serves each connection on one of a few
// threads, so two clients that send their request slowly blocked every scrape, and a few
// hundred idle connections filled its queue. Here one thread polls every connection
// without blocking, and the bounds are explicit:
//  - a connection must deliver its whole request (at most `max_request_bytes`) within
//    `request_timeout` of being accepted, and take its response within `response_timeout`;
//    otherwise it is closed;
//  - at most `max_connections` are open; a new connection beyond that evicts the oldest
//    one still waiting for its request (a scraper sends its request at once, so it is
//    never the oldest waiting for long);
//  - when accept() fails for want of file descriptors (EMFILE, ENFILE), the listener is
//    left alone for a back-off that doubles up to a second, instead of spinning, and the
//    oldest connection still waiting for its request is closed to make room.
// It answers GET /metrics with the text `render` returns (called on the server's thread),
// 404 for other paths, 405 for other methods, 400 for what is not HTTP; every response
// closes its connection. stop() (and the destructor) returns at once: the thread waits on
// an eventfd besides its sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"

namespace tributary {

struct MetricsServerOptions {
  std::size_t max_connections = 256;
  std::size_t max_request_bytes = 8192;
  Duration request_timeout = std::chrono::seconds(2);
  Duration response_timeout = std::chrono::seconds(5);
};

class MetricsServer {
 public:
  // `bind`: "HOST:PORT" ("127.0.0.1:0", "0.0.0.0:9464", "[::1]:0"); port 0 picks an
  // ephemeral one (see port()). kInvalidArgument for an unusable address, kUnavailable
  // when it cannot be bound. `log` gets refusals (rate-limited) and back-offs.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& bind,
                                                      std::function<std::string()> render,
                                                      Logger log,
                                                      MetricsServerOptions options = {});
  ~MetricsServer();  // stop()s
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  std::uint16_t port() const;
  void stop();

  class Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary
