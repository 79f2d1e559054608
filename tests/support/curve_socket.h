// Test helper: give a raw ZeroMQ DEALER the CURVE keys of a cluster (control/curve_keys.h),
// so that a test can speak to a coordinator by hand as an agent holding the secret would.
#pragma once

#include <string_view>
#include <zmq.hpp>

#include "control/curve_keys.h"
#include "control_client/curve_dealer.h"

namespace tributary::testing {

inline std::string_view curve_key_bytes(const CurveKey& key) {
  return {reinterpret_cast<const char*>(key.data()), key.size()};
}

// Client keys for a DEALER that connects to a coordinator with `secret`: what every agent's
// DEALER gets (control_client/curve_dealer.h).
inline void use_cluster_client_keys(zmq::socket_t& socket, std::string_view secret) {
  control_client::use_cluster_client_keys(socket, control::derive_curve_keys(secret));
}

// Server keys for a ROUTER that plays the coordinator of a cluster with `secret`.
inline void use_cluster_server_keys(zmq::socket_t& socket, std::string_view secret) {
  const auto keys = control::derive_curve_keys(secret);
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, curve_key_bytes(keys.server.secret_key));
}

}  // namespace tributary::testing
