// A member that holds the cluster secret but not the protocol: a CURVE DEALER driven by
// hand. It joins with the real challenge-response, heartbeats, and answers each view with
// a Ready whose committed_seq the test chooses (an impossible one), or sends what the test
// asks for. Its data address is a port where nobody listens.
#pragma once

#include <atomic>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "control/codec.h"
#include "control/join_auth.h"
#include "tests/support/curve_socket.h"

namespace tributary::hostile {

class RogueMember {
 public:
  RogueMember(const std::string& endpoint, const std::string& secret, std::string name,
              std::optional<std::string> routing_id = std::nullopt)
      : secret_(secret), name_(std::move(name)), dealer_(ctx_, zmq::socket_type::dealer) {
    dealer_.set(zmq::sockopt::linger, 0);
    if (routing_id) dealer_.set(zmq::sockopt::routing_id, *routing_id);
    testing::use_cluster_client_keys(dealer_, secret);
    dealer_.connect(endpoint);
  }
  ~RogueMember() { stop(); }

  // The JoinRequest this member sends (tests may change its labels first).
  control::JoinRequest request() const {
    control::JoinRequest r;
    r.set_protocol_version(control::kProtocolVersion);
    r.set_name(name_);
    r.set_host("rogue");
    r.set_data_address("127.0.0.1:9");  // discard port: nobody listens on loopback
    return r;
  }

  // Joins: the member id, or the JoinRejected (or nothing) that answered instead.
  std::optional<membership::MemberId> join(const control::JoinRequest& labels,
                                           control::Envelope* answer = nullptr) {
    control::Envelope req;
    *req.mutable_join_request() = labels;
    send(req);
    auto challenge = receive();
    if (answer && challenge) *answer = *challenge;
    if (!challenge || !challenge->has_challenge()) return std::nullopt;
    const Nonce server = *control::nonce_from_bytes(challenge->challenge().nonce());
    const Nonce client = random_nonce();
    control::Envelope proof;
    proof.mutable_join_proof()->set_client_nonce(control::to_bytes(client));
    proof.mutable_join_proof()->set_mac(
        control::to_bytes(control::join_proof_mac(secret_, server, client, labels.name())));
    send(proof);
    auto accepted = receive();
    if (answer && accepted) *answer = *accepted;
    if (!accepted || !accepted->has_join_accepted()) return std::nullopt;
    id_ = accepted->join_accepted().member_id();
    return id_;
  }

  // From now on a thread heartbeats every 100 ms and answers every view that includes
  // this member with Ready{committed_seq = lie} once it has been in a started view (as a
  // joiner it reports 0, like an honest one: joiners' claims do not count).
  void run(std::uint64_t lie) {
    thread_ = std::thread([this, lie] { loop(lie); });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool evicted() const { return evicted_; }
  int lies_told() const { return lies_; }

 private:
  void send(const control::Envelope& env) {
    const std::string bytes = control::encode_envelope(env);
    dealer_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  }
  std::optional<control::Envelope> receive(
      std::chrono::milliseconds wait = std::chrono::seconds(10)) {
    zmq::pollitem_t item{dealer_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, wait);
    zmq::message_t msg;
    if (!(item.revents & ZMQ_POLLIN) || !dealer_.recv(msg, zmq::recv_flags::dontwait))
      return std::nullopt;
    auto env = control::decode_envelope(msg.to_string_view());
    return env ? std::optional(*env) : std::nullopt;
  }

  void loop(std::uint64_t lie) {
    auto next_heartbeat = std::chrono::steady_clock::now();
    membership::Epoch known = 0;    // latest view
    membership::Epoch started = 0;  // latest view whose Go we got
    while (!stop_) {
      if (std::chrono::steady_clock::now() >= next_heartbeat) {
        control::Envelope hb;
        hb.mutable_heartbeat()->set_member_id(id_);
        hb.mutable_heartbeat()->set_epoch(known);
        send(hb);
        next_heartbeat += std::chrono::milliseconds(100);
      }
      auto env = receive(std::chrono::milliseconds(20));
      if (!env) continue;
      if (env->has_evicted() && !env->evicted().unknown()) evicted_ = true;
      if (env->has_go()) started = std::max(started, env->go().epoch());
      if (!env->has_view() || env->view().epoch() <= known) continue;
      known = env->view().epoch();
      control::Envelope ready;
      auto* r = ready.mutable_ready();
      r->set_member_id(id_);
      r->set_epoch(known);
      r->set_previous_epoch(started);
      if (started > 0) {
        r->set_committed_seq(lie);
        ++lies_;
      }
      send(ready);
    }
  }

  std::string secret_;
  std::string name_;
  zmq::context_t ctx_;
  zmq::socket_t dealer_;
  membership::MemberId id_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> evicted_{false};
  std::atomic<int> lies_{0};
};

}  // namespace tributary::hostile
