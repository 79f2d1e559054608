// Every DEALER this library opens to a coordinator speaks CURVE (docs/security.md): the
// coordinators' public key and the agents' key pair both derive from the cluster secret,
// so any replica is the same server to us and a process without the secret cannot even
// finish the ZeroMQ handshake. Internal to the control plane's clients (this header
// includes ZeroMQ's).
#pragma once

#include <string>
#include <zmq.hpp>

#include "control/curve_keys.h"

namespace tributary::control_client {

// Sets the cluster's client keys on `socket`; before connect().
void use_cluster_client_keys(zmq::socket_t& socket, const control::ClusterCurveKeys& keys);

// What a DEALER never says by itself: that the coordinator refused its CURVE handshake.
// A coordinator with another secret cannot open our HELLO and closes the connection (no
// detail), or its ZAP handler refuses our key (auth); a plain ZeroMQ peer does not speak
// CURVE (protocol). Watched through a socket monitor on an inproc endpoint.
class HandshakeWatch {
 public:
  // Refusals in a row, none accepted, that mean a wrong secret rather than a hiccup.
  static constexpr int kMeaningWrongSecret = 2;

  // Watches `dealer` (before it connects). Call again for each new DEALER.
  void watch(zmq::context_t& context, zmq::socket_t& dealer);
  // Stops watching `dealer` (it stays connected).
  void stop(zmq::socket_t& dealer);
  // To poll for events; readable when refused_handshakes() may have changed.
  zmq::socket_t& events() { return monitor_; }
  // Handshakes refused since watching began; 0 once one succeeded (the secret is right).
  int refused_handshakes();
  // "<who> refused our CURVE handshake N times: wrong cluster secret ...".
  static std::string wrong_secret(const std::string& who);

 private:
  zmq::socket_t monitor_;
  int opened_ = 0;
  int refusals_ = 0;
  bool succeeded_ = false;
};

}  // namespace tributary::control_client
