// Cluster-secret authentication primitives (HMAC-SHA256 from OpenSSL's libcrypto).
// The secret itself never travels: peers prove they know it by MACing a fresh nonce
// chosen by the other side (challenge-response), which defeats replay.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace tributary {

using Mac = std::array<std::uint8_t, 32>;
using Nonce = std::array<std::uint8_t, 16>;

Mac hmac_sha256(std::string_view secret, std::span<const std::uint8_t> message);
// Cryptographically random bytes from the OS (RAND_bytes).
Nonce random_nonce();
// Compares without leaking the position of the first difference through timing.
bool macs_equal(const Mac& a, const Mac& b);

// X25519 (Curve25519 Diffie-Hellman, RFC 7748): the public key of a 32-byte secret key
// (clamped as the RFC says), as CurveZMQ and libsodium's crypto_scalarmult_base compute it.
using CurveKey = std::array<std::uint8_t, 32>;
CurveKey x25519_public_key(const CurveKey& secret_key);

}  // namespace tributary
