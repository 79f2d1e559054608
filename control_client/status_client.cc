#include "control_client/status_client.h"

#include <algorithm>
#include <optional>
#include <zmq.hpp>

#include "control/codec.h"
#include "control/status_codec.h"
#include "control_client/curve_dealer.h"

namespace tributary::control_client {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

class Exchange {
 public:
  Exchange(std::string endpoint, const std::string& secret, Duration timeout)
      : endpoint_(std::move(endpoint)),
        timeout_(timeout),
        deadline_(Deadline::after(timeout)),
        socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::maxmsgsize,
                static_cast<std::int64_t>(control::kMaxStatusReplyBytes + 1024));
    use_cluster_client_keys(socket_, control::derive_curve_keys(secret));
    handshakes_.watch(context_, socket_);
  }

  Status connect() {
    try {
      socket_.connect(endpoint_);
    } catch (const zmq::error_t& e) {
      return error(StatusCode::kInvalidArgument,
                   "cannot connect to '" + endpoint_ + "': " + e.what());
    }
    return Status::ok();
  }

  Status send(const control::Envelope& env) {
    const std::string bytes = control::encode_envelope(env);
    // The DEALER queues until connected; a full queue (never, for one message) is an error.
    if (!socket_.send(zmq::buffer(bytes), zmq::send_flags::dontwait))
      return error(StatusCode::kUnavailable, "coordinator " + endpoint_ + ": cannot queue");
    return Status::ok();
  }

  // The next message, or kTimedOut at the deadline.
  Result<control::Envelope> receive() {
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (deadline_.passed(now)) {
        return error(StatusCode::kTimedOut,
                     "no answer from the coordinator at " + endpoint_ + " within " +
                         std::to_string(duration_cast<milliseconds>(timeout_).count()) +
                         " ms (is it running there?)");
      }
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                                 {handshakes_.events().handle(), 0, ZMQ_POLLIN, 0}};
      const auto wait = duration_cast<milliseconds>(deadline_.at - now) + milliseconds(1);
      zmq::poll(items, 2, std::min(wait, milliseconds(100)));
      if ((items[1].revents & ZMQ_POLLIN) &&
          handshakes_.refused_handshakes() >= HandshakeWatch::kMeaningWrongSecret) {
        return error(StatusCode::kAuthFailed,
                     HandshakeWatch::wrong_secret("the coordinator at " + endpoint_));
      }
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      zmq::message_t msg;
      if (!socket_.recv(msg, zmq::recv_flags::dontwait)) continue;
      auto env = control::decode_envelope(msg.to_string_view(), control::kMaxStatusReplyBytes);
      if (!env) {
        return error(StatusCode::kBadFrame,
                     "coordinator " + endpoint_ + " sent garbage: " + env.status().message());
      }
      return env;
    }
  }

  Status denied(const control::Envelope& env, std::string_view expected) const {
    if (env.has_status_denied()) {
      const std::string& reason = env.status_denied().reason();
      return error(
          reason == "wrong cluster secret" ? StatusCode::kAuthFailed : StatusCode::kUnavailable,
          "coordinator " + endpoint_ + " refused the status request: " + reason);
    }
    return error(StatusCode::kBadFrame, "coordinator " + endpoint_ + " answered with '" +
                                            std::string(control::body_name(env.body_case())) +
                                            "', expected " + std::string(expected));
  }

  const std::string& endpoint() const { return endpoint_; }

 private:
  std::string endpoint_;
  Duration timeout_;
  Deadline deadline_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  HandshakeWatch handshakes_;
};

Result<membership::ClusterStatus> open_reply(const control::StatusReply& reply,
                                             const std::string& secret, const Nonce& server_nonce,
                                             const Nonce& client_nonce,
                                             const std::string& endpoint) {
  auto mac = control::mac_from_bytes(reply.mac());
  if (!mac) return error(StatusCode::kBadFrame, "status reply: " + mac.status().message());
  if (!macs_equal(*mac,
                  control::status_reply_mac(secret, server_nonce, client_nonce, reply.report()))) {
    return error(StatusCode::kAuthFailed,
                 "the status reply from " + endpoint +
                     " does not carry the cluster secret's MAC (a different cluster, or tampered)");
  }
  control::StatusReport report;
  if (!report.ParseFromString(reply.report()))
    return error(StatusCode::kBadFrame, "status report from " + endpoint + " does not parse");
  return control::status_from_proto(report);
}

// One exchange with `endpoint`; a NotLeader answer sets `*leader` (its hint, maybe empty)
// and returns kUnavailable.
Result<membership::ClusterStatus> fetch_once(const std::string& endpoint, const std::string& secret,
                                             Duration timeout, std::optional<std::string>* leader) {
  if (!endpoint.starts_with("tcp://"))
    return error(StatusCode::kInvalidArgument,
                 "coordinator '" + endpoint + "' is not tcp://HOST:PORT");
  try {
    Exchange x(endpoint, secret, timeout);
    TRIB_RETURN_IF_ERROR(x.connect());
    control::Envelope request;
    request.mutable_status_request()->set_protocol_version(control::kProtocolVersion);
    TRIB_RETURN_IF_ERROR(x.send(request));
    TRIB_ASSIGN_OR_RETURN(control::Envelope challenge, x.receive());
    if (challenge.has_not_leader()) {
      *leader = challenge.not_leader().leader();
      return error(StatusCode::kUnavailable, "coordinator " + endpoint + " is a standby");
    }
    if (!challenge.has_challenge()) return x.denied(challenge, "a challenge");
    TRIB_ASSIGN_OR_RETURN(Nonce server_nonce,
                          control::nonce_from_bytes(challenge.challenge().nonce()));
    const Nonce client_nonce = random_nonce();
    control::Envelope proof;
    proof.mutable_status_proof()->set_client_nonce(control::to_bytes(client_nonce));
    proof.mutable_status_proof()->set_mac(
        control::to_bytes(control::status_request_mac(secret, server_nonce, client_nonce)));
    TRIB_RETURN_IF_ERROR(x.send(proof));
    TRIB_ASSIGN_OR_RETURN(control::Envelope reply, x.receive());
    if (!reply.has_status_reply()) return x.denied(reply, "a status reply");
    return open_reply(reply.status_reply(), secret, server_nonce, client_nonce, endpoint);
  } catch (const zmq::error_t& e) {
    return error(StatusCode::kUnavailable,
                 "coordinator " + endpoint + ": ZeroMQ error: " + std::string(e.what()));
  }
}

}  // namespace

Result<membership::ClusterStatus> fetch_status(const std::string& endpoint,
                                               const std::string& secret, Duration timeout) {
  if (secret.empty()) return error(StatusCode::kInvalidArgument, "the cluster secret is empty");
  const Deadline deadline = Deadline::after(timeout);
  std::optional<std::string> leader;
  auto status = fetch_once(endpoint, secret, timeout, &leader);
  if (!leader) return status;
  if (leader->empty() || *leader == endpoint) {
    return error(StatusCode::kUnavailable,
                 "coordinator " + endpoint +
                     " is a standby and knows no leader yet (an election may be in progress: "
                     "ask again, or ask another coordinator)");
  }
  const Duration left = deadline.at - std::chrono::steady_clock::now();
  std::optional<std::string> again;
  status = fetch_once(*leader, secret, std::max(left, Duration::zero()), &again);
  if (again) {
    return error(StatusCode::kUnavailable, "coordinator " + endpoint + " is a standby and named " +
                                               *leader +
                                               " as the leader, which is a standby too "
                                               "(a takeover in progress: ask again)");
  }
  if (!status) {
    return error(status.status().code(),
                 "coordinator " + endpoint +
                     " is a standby; the leader it named: " + status.status().message());
  }
  status->asked_standby = endpoint;
  status->answered_by = *leader;
  return status;
}

}  // namespace tributary::control_client
