#include "core/hash.h"

#include <openssl/evp.h>

#include "core/check.h"

namespace tributary {

std::uint64_t fnv1a64(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) h = (h ^ std::to_integer<std::uint64_t>(b)) * 0x100000001b3ull;
  return h;
}

struct Sha256::Context {
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> md{EVP_MD_CTX_new()};
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  TRIB_CHECK(ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md.get(), EVP_sha256(), nullptr) == 1)
      << "SHA-256 context";
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

Sha256& Sha256::update(const void* data, std::size_t size) {
  TRIB_CHECK(ctx_ != nullptr) << "Sha256 used after finish()";
  if (size > 0) {
    TRIB_CHECK(EVP_DigestUpdate(ctx_->md.get(), data, size) == 1) << "SHA-256 update";
  }
  return *this;
}

Sha256Digest Sha256::finish() {
  TRIB_CHECK(ctx_ != nullptr) << "Sha256 finished twice";
  Sha256Digest out{};
  unsigned int len = 0;
  TRIB_CHECK(EVP_DigestFinal_ex(ctx_->md.get(), out.data(), &len) == 1 && len == out.size())
      << "SHA-256 final";
  ctx_.reset();
  return out;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

}  // namespace tributary
