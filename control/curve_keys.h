// The CurveZMQ keys of a cluster, derived from its secret (docs/security.md).
//
// The control plane runs over CURVE (RFC 26): every message after the ZMTP greeting is
// encrypted and authenticated with per-connection ephemeral keys. Nobody distributes keys:
// each side derives them from the cluster secret,
//
//   server secret key = HMAC-SHA256(secret, "tributary/curve/server/v1")
//   client secret key = HMAC-SHA256(secret, "tributary/curve/client/v1")
//   public key        = X25519 base-point multiplication of the secret key
//
// so an agent knows the coordinator's public key (it cannot even say HELLO without it),
// and the coordinator's ZAP handler admits only connections that prove the client secret
// key (CURVE's INITIATE vouch). A peer without the cluster secret never gets past the
// handshake. Every holder of the secret can derive the server's secret key too, and so
// could impersonate the coordinator to another member; members holding the secret are
// trusted with the sum already (docs/security.md weighs this).
#pragma once

#include <string_view>

#include "core/auth.h"

namespace tributary::control {

struct CurveKeyPair {
  CurveKey public_key{};
  CurveKey secret_key{};
};

struct ClusterCurveKeys {
  CurveKeyPair server;  // the coordinator's ROUTER
  CurveKeyPair client;  // every agent's DEALER
};

ClusterCurveKeys derive_curve_keys(std::string_view cluster_secret);

// The ZAP domain the coordinator's socket names (RFC 27); its handler refuses the others.
inline constexpr std::string_view kZapDomain = "tributary";

}  // namespace tributary::control
