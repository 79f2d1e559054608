#include "control/join_auth.h"

#include <optional>
#include <vector>

namespace tributary::control {
namespace {

// HMAC(secret, domain | server_nonce | client_nonce | [member_id, 8 bytes big-endian] |
// [name]): the layouts of join_auth.h, built in one place.
Mac proof(std::string_view secret, std::string_view domain, const Nonce& server_nonce,
          const Nonce& client_nonce, std::optional<std::uint64_t> member_id,
          std::optional<std::string_view> name) {
  std::vector<std::uint8_t> msg(domain.begin(), domain.end());
  msg.insert(msg.end(), server_nonce.begin(), server_nonce.end());
  msg.insert(msg.end(), client_nonce.begin(), client_nonce.end());
  if (member_id) {
    for (int shift = 56; shift >= 0; shift -= 8)
      msg.push_back(static_cast<std::uint8_t>(*member_id >> shift));
  }
  if (name) msg.insert(msg.end(), name->begin(), name->end());
  return hmac_sha256(secret, msg);
}

}  // namespace

Mac join_proof_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                   std::string_view member_name) {
  return proof(secret, "tributary/join/v1", server_nonce, client_nonce, std::nullopt, member_name);
}

Mac resume_proof_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                     std::uint64_t member_id, std::string_view member_name) {
  return proof(secret, "tributary/resume/v1", server_nonce, client_nonce, member_id, member_name);
}

Mac coordinator_proof_mac(std::string_view secret, const Nonce& server_nonce,
                          const Nonce& client_nonce, std::uint64_t member_id) {
  return proof(secret, "tributary/accept/v1", server_nonce, client_nonce, member_id, std::nullopt);
}

}  // namespace tributary::control
