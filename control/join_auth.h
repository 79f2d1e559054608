// The MACs of the join handshake, shared by agent and coordinator so both sides compute
// byte-identical inputs. Domain-separation prefixes keep a join proof from ever being
// accepted as a coordinator proof (or the other way round).
//
//   join proof        = HMAC(secret, "tributary/join/v1"   | server_nonce | client_nonce | name)
//   resume proof      = HMAC(secret, "tributary/resume/v1" | server_nonce | client_nonce |
//                                     member_id as 8 bytes big-endian | name)
//   coordinator proof = HMAC(secret, "tributary/accept/v1" | server_nonce | client_nonce |
//                                     member_id as 8 bytes big-endian)
#pragma once

#include <cstdint>
#include <string_view>

#include "core/auth.h"

namespace tributary::control {

Mac join_proof_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                   std::string_view member_name);
Mac resume_proof_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                     std::uint64_t member_id, std::string_view member_name);
Mac coordinator_proof_mac(std::string_view secret, const Nonce& server_nonce,
                          const Nonce& client_nonce, std::uint64_t member_id);

}  // namespace tributary::control
