#include "core/auth.h"

#include <openssl/crypto.h>
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

}  // namespace tributary
