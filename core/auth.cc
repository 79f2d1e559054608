#include "core/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "core/check.h"

namespace tributary {

Mac hmac_sha256(std::string_view secret, std::span<const std::uint8_t> message) {
  Mac mac{};
  unsigned int len = 0;
  const unsigned char* out = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                                  message.data(), message.size(), mac.data(), &len);
  TRIB_CHECK(out != nullptr && len == mac.size()) << "HMAC-SHA256 failed";
  return mac;
}

Nonce random_nonce() {
  Nonce n{};
  TRIB_CHECK(RAND_bytes(n.data(), static_cast<int>(n.size())) == 1) << "RAND_bytes failed";
  return n;
}

bool macs_equal(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

CurveKey x25519_public_key(const CurveKey& secret_key) {
  EVP_PKEY* key =
      EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, secret_key.data(), secret_key.size());
  TRIB_CHECK(key != nullptr) << "X25519 key creation failed";
  CurveKey out{};
  std::size_t len = out.size();
  const int ok = EVP_PKEY_get_raw_public_key(key, out.data(), &len);
  EVP_PKEY_free(key);
  TRIB_CHECK(ok == 1 && len == out.size()) << "X25519 public key derivation failed";
  return out;
}

}  // namespace tributary
