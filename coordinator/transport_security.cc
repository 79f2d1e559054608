// The coordinator's transport security (docs/security.md): CURVE on the ROUTER with keys
// derived from the cluster secret, the ZAP handler that admits only the cluster's client
// key, and the monitor that reports connections refused during the ZeroMQ handshake.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <zmq.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coordinator/service.h"
#include "coordinator/zap_handler.h"

namespace tributary::coordinator {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr const char* kMonitorEndpoint = "inproc://tributary-coordinator-monitor";
// RFC 27: libzmq sends its ZAP requests to this endpoint of the socket's context.
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

constexpr std::size_t kMaxTrackedConnections = 65536;

std::string_view key_view(const CurveKey& key) {
  return {reinterpret_cast<const char*>(key.data()), key.size()};
}

// "10.0.0.7:51234", or "?" when the descriptor is gone already.
std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "?";
}

}  // namespace

void Coordinator::Service::secure_router() {
  keys_ = control::derive_curve_keys(config_.secret);
  zap_ = zmq::socket_t(context_, zmq::socket_type::rep);
  zap_.set(zmq::sockopt::linger, 0);
  zap_.bind(kZapEndpoint);
  // libzmq gives a connection that names no routing id of its own the id 0x00 + a 32-bit
  // counter that starts at rand(). Nobody seeds rand(), so the counter started at
  // 0x6b8b4567 in every process, and a peer that claimed the next id for itself made
  // libzmq abort when the next plain connection arrived. The counter is read when the
  // socket is created: seed rand() from the OS's random bytes first.
  const Nonce seed = random_nonce();
  unsigned s = 0;
  std::memcpy(&s, seed.data(), sizeof s);
  std::srand(s);
  router_ = zmq::socket_t(context_, zmq::socket_type::router);
  router_.set(zmq::sockopt::curve_server, true);
  router_.set(zmq::sockopt::curve_secretkey, key_view(keys_.server.secret_key));
  router_.set(zmq::sockopt::zap_domain, std::string(control::kZapDomain));
  router_.set(zmq::sockopt::handshake_ivl,
              static_cast<int>(duration_cast<milliseconds>(config_.handshake_timeout).count()));
  if (zmq_socket_monitor(router_.handle(), kMonitorEndpoint,
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED | ZMQ_EVENT_DISCONNECTED |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0) {
    throw zmq::error_t();
  }
  monitor_ = zmq::socket_t(context_, zmq::socket_type::pair);
  monitor_.connect(kMonitorEndpoint);
}

void Coordinator::Service::drain_monitor() {
  zmq::message_t event;
  while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
    // Event frame: 16-bit event id + 32-bit value; then a frame with the endpoint (libzmq
    // 4.3 names the listening endpoint there, not the peer).
    zmq::message_t endpoint;
    if (event.more()) (void)monitor_.recv(endpoint, zmq::recv_flags::none);
    if (event.size() < 6) continue;
    std::uint16_t id = 0;
    std::uint32_t value = 0;
    std::memcpy(&id, event.data(), sizeof id);
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof value);
    on_monitor_event(id, value);
  }
}

// libzmq tells the peer of a failed handshake only through the connection's file
// descriptor: ACCEPTED(fd) opens it, the failure follows, then DISCONNECTED(fd) at once
// (one I/O thread emits both in the same call). The address is looked up at ACCEPTED.
void Coordinator::Service::on_monitor_event(std::uint16_t id, std::uint32_t value) {
  const int fd = static_cast<int>(value);
  switch (id) {
    case ZMQ_EVENT_ACCEPTED: {
      if (accepted_.size() >= kMaxTrackedConnections) accepted_.clear();
      accepted_[fd] = peer_address(fd);
      member_on_fd_.erase(fd);  // a new connection on a reused descriptor
      return;
    }
    case ZMQ_EVENT_ACCEPT_FAILED:
      refusal("accept", std::string("cannot accept a connection: ") + std::strerror(fd) +
                            " (libzmq retries)");
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: return;  // the ZAP handler logged it, with the address
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      flush_handshake_failure("?");
      failed_handshake_ = describe_handshake_failure(id, value);
      return;
    case ZMQ_EVENT_DISCONNECTED: {
      auto it = accepted_.find(fd);
      const std::string address = it == accepted_.end() ? "?" : it->second;
      if (it != accepted_.end()) accepted_.erase(it);
      flush_handshake_failure(address);
      if (auto m = member_on_fd_.find(fd); m != member_on_fd_.end()) {
        const MemberId id = m->second;
        member_on_fd_.erase(m);
        if (config_.confirm_on_close && membership_ && membership_->find(id)) {
          log_.info("member " + std::to_string(id) + "'s control connection closed");
          apply(membership_->connection_closed(id, clock_.now()));
        }
      }
      return;
    }
    default: return;
  }
}

std::string Coordinator::Service::describe_handshake_failure(std::uint16_t id,
                                                             std::uint32_t value) {
  if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
    metrics_->auth_failed();
    return "its CURVE handshake does not use the cluster's keys (a wrong cluster secret)";
  }
  if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
      value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
    metrics_->auth_failed();
    return "it does not speak CURVE (no proof of the cluster secret)";
  }
  metrics_->malformed();
  if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    // The peer hung up mid-handshake (a plain ZeroMQ peer does on seeing CURVE), or
    // stayed idle past the handshake deadline.
    return "it closed or stalled in its ZeroMQ handshake (no proof of the cluster secret; "
           "idle ones are closed after " +
           std::to_string(duration_cast<milliseconds>(config_.handshake_timeout).count()) + " ms)";
  }
  char code[16];
  std::snprintf(code, sizeof code, "0x%08x", value);
  // Bytes that are not ZMTP, or that fail CURVE's authentication of an established
  // session (bytes injected on the path).
  return std::string("it broke the ZeroMQ protocol (libzmq error ") + code +
         ": not ZMTP, or bytes that fail CURVE's authentication)";
}

void Coordinator::Service::flush_handshake_failure(const std::string& address) {
  if (failed_handshake_.empty()) return;
  refusal("handshake", "refused a connection from " + address + ": " + failed_handshake_);
  failed_handshake_.clear();
}

void Coordinator::Service::drain_zap() {
  // REP: each request is answered before the next one is read.
  for (;;) {
    std::vector<std::string> frames;
    zmq::message_t frame;
    if (!zap_.recv(frame, zmq::recv_flags::dontwait)) return;
    frames.push_back(frame.to_string());
    while (frame.more() && frames.size() < 16) {
      (void)zap_.recv(frame, zmq::recv_flags::none);
      frames.push_back(frame.to_string());
    }
    while (frame.more()) (void)zap_.recv(frame, zmq::recv_flags::none);
    auto request = parse_zap_request(frames);
    ZapRequest fallback;
    if (frames.size() > 1) fallback.request_id = frames[1];
    const ZapVerdict verdict = request ? judge_zap_request(*request, keys_.client.public_key)
                                       : ZapVerdict{false, request.status().message()};
    if (!verdict.allowed) {
      metrics_->auth_failed();
      refusal("zap", "refused a connection from " + (request ? request->address : "?") + ": " +
                         verdict.reason);
    }
    const auto reply = zap_reply(request ? *request : fallback, verdict);
    for (std::size_t i = 0; i < reply.size(); ++i) {
      zap_.send(zmq::buffer(reply[i]),
                i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
}

void Coordinator::Service::refusal(std::string_view kind, const std::string& line) {
  refusals_.log(log_, LogLevel::kWarn, kind, line, clock_.now());
}

}  // namespace tributary::coordinator
