#include "control/curve_keys.h"

#include <algorithm>

namespace tributary::control {
namespace {

CurveKeyPair derive_pair(std::string_view secret, std::string_view label) {
  const Mac digest =
      hmac_sha256(secret, {reinterpret_cast<const std::uint8_t*>(label.data()), label.size()});
  CurveKeyPair pair;
  static_assert(sizeof(pair.secret_key) == sizeof(digest));
  std::copy(digest.begin(), digest.end(), pair.secret_key.begin());
  pair.public_key = x25519_public_key(pair.secret_key);
  return pair;
}

}  // namespace

ClusterCurveKeys derive_curve_keys(std::string_view cluster_secret) {
  return {derive_pair(cluster_secret, "tributary/curve/server/v1"),
          derive_pair(cluster_secret, "tributary/curve/client/v1")};
}

}  // namespace tributary::control
