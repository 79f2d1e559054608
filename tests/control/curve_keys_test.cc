// The CURVE keys of a cluster: derived from the secret alone, the same on every member, and
// the public halves exactly what libzmq (libsodium) computes for the secret halves.
#include "control/curve_keys.h"

#include <gtest/gtest.h>
#include <zmq.h>

#include <string>

namespace tributary::control {
namespace {

// libzmq's own X25519 (libsodium's crypto_scalarmult_base), through its Z85 API.
CurveKey zmq_public_of(const CurveKey& secret) {
  char secret_z85[41] = {};
  char public_z85[41] = {};
  EXPECT_NE(zmq_z85_encode(secret_z85, secret.data(), secret.size()), nullptr);
  EXPECT_EQ(zmq_curve_public(public_z85, secret_z85), 0);
  CurveKey out{};
  EXPECT_NE(zmq_z85_decode(out.data(), public_z85), nullptr);
  return out;
}

TEST(CurveKeys, DerivedFromTheSecretAloneAndAgreeingWithLibzmq) {
  ASSERT_EQ(zmq_has("curve"), 1) << "libzmq built without CURVE";
  const auto a = derive_curve_keys("correct horse battery staple");
  const auto b = derive_curve_keys("correct horse battery staple");
  EXPECT_EQ(a.server.public_key, b.server.public_key);
  EXPECT_EQ(a.client.secret_key, b.client.secret_key);
  EXPECT_NE(a.server.secret_key, a.client.secret_key) << "server and client keys differ";
  EXPECT_EQ(a.server.public_key, zmq_public_of(a.server.secret_key));
  EXPECT_EQ(a.client.public_key, zmq_public_of(a.client.secret_key));
  const auto other = derive_curve_keys("correct horse battery stapler");
  EXPECT_NE(other.server.public_key, a.server.public_key);
  EXPECT_NE(other.client.public_key, a.client.public_key);
}

TEST(CurveKeys, PinnedDerivation) {
  // HMAC-SHA256("secret", "tributary/curve/server/v1") and its X25519 public key (computed
  // with Python's hmac and libzmq's zmq_curve_public), pinned so that a change of the
  // derivation, which would split a cluster of mixed versions, is seen.
  const auto keys = derive_curve_keys("secret");
  char z85[41] = {};
  ASSERT_NE(zmq_z85_encode(z85, keys.server.public_key.data(), keys.server.public_key.size()),
            nullptr);
  EXPECT_EQ(std::string(z85), "3BzH6S(ox-s8/abjg5p>Nx]jkWWOOA2mY1so(#Ho");
}

}  // namespace
}  // namespace tributary::control
