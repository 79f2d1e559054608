#include "control_client/curve_dealer.h"

#include <zmq.h>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tributary::control_client {
namespace {

std::string_view bytes_of(const CurveKey& key) {
  return {reinterpret_cast<const char*>(key.data()), key.size()};
}

}  // namespace

void use_cluster_client_keys(zmq::socket_t& socket, const control::ClusterCurveKeys& keys) {
  socket.set(zmq::sockopt::curve_serverkey, bytes_of(keys.server.public_key));
  socket.set(zmq::sockopt::curve_publickey, bytes_of(keys.client.public_key));
  socket.set(zmq::sockopt::curve_secretkey, bytes_of(keys.client.secret_key));
}

void HandshakeWatch::watch(zmq::context_t& context, zmq::socket_t& dealer) {
  // A fresh name per DEALER: the previous one's monitor may not be torn down yet.
  const std::string at = "inproc://tributary-handshake-watch-" +
                         std::to_string(reinterpret_cast<std::uintptr_t>(this)) + "-" +
                         std::to_string(++opened_);
  if (zmq_socket_monitor(dealer.handle(), at.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                             ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0) {
    throw zmq::error_t();
  }
  monitor_ = zmq::socket_t(context, zmq::socket_type::pair);
  monitor_.connect(at);
}

void HandshakeWatch::stop(zmq::socket_t& dealer) {
  zmq_socket_monitor(dealer.handle(), nullptr, 0);
  monitor_ = zmq::socket_t();
}

int HandshakeWatch::refused_handshakes() {
  zmq::message_t event;
  while (monitor_.handle() != nullptr && monitor_.recv(event, zmq::recv_flags::dontwait)) {
    zmq::message_t endpoint;
    if (event.more()) (void)monitor_.recv(endpoint, zmq::recv_flags::none);
    std::uint16_t id = 0;
    if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      succeeded_ = true;
    } else if (!succeeded_) {
      ++refusals_;
    }
  }
  return succeeded_ ? 0 : refusals_;
}

std::string HandshakeWatch::wrong_secret(const std::string& who) {
  return who + " refused our CURVE handshake " + std::to_string(kMeaningWrongSecret) +
         " times: wrong cluster secret (ours differs from the coordinator's), or not a "
         "Tributary coordinator";
}

}  // namespace tributary::control_client
