#include "membership/join_auth.h"

#include <vector>

namespace tributary::membership {
namespace {

void append(std::vector<std::uint8_t>& out, std::string_view s) {
  out.insert(out.end(), s.begin(), s.end());
}
void append(std::vector<std::uint8_t>& out, const Nonce& n) {
  out.insert(out.end(), n.begin(), n.end());
}
void append_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

}  // namespace

Mac join_proof_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                   std::string_view member_name) {
  std::vector<std::uint8_t> msg;
  append(msg, "tributary/join/v1");
  append(msg, server_nonce);
  append(msg, client_nonce);
  append(msg, member_name);
  return hmac_sha256(secret, msg);
}

Mac resume_proof_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                     std::uint64_t member_id, std::string_view member_name) {
  std::vector<std::uint8_t> msg;
  append(msg, "tributary/resume/v1");
  append(msg, server_nonce);
  append(msg, client_nonce);
  append_u64(msg, member_id);
  append(msg, member_name);
  return hmac_sha256(secret, msg);
}

Mac coordinator_proof_mac(std::string_view secret, const Nonce& server_nonce,
                          const Nonce& client_nonce, std::uint64_t member_id) {
  std::vector<std::uint8_t> msg;
  append(msg, "tributary/accept/v1");
  append(msg, server_nonce);
  append(msg, client_nonce);
  append_u64(msg, member_id);
  return hmac_sha256(secret, msg);
}

}  // namespace tributary::membership
