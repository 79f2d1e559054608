// The coordinator's half of the status exchange's authentication: the nonce it chose for
// each connection that asked for a status, until that connection proves it knows the
// cluster secret (control/status_codec.h). Pure: time is passed in, no sockets.
//
// Guarantees, as for joins (join_gate.h): a proof is checked once against the nonce chosen
// for that very connection, within `timeout` of the challenge; at most `max_pending`
// challenges are open, so askers that never answer cannot grow memory without bound.
// Status challenges are kept apart from join handshakes: asking for a status never
// starts, ends or replaces a join.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>

#include "core/auth.h"
#include "core/clock.h"
#include "core/status.h"

namespace tributary::coordinator {

class StatusGate {
 public:
  StatusGate(std::string secret, Duration timeout, std::size_t max_pending);

  // The nonce for a Challenge. kUnavailable when max_pending challenges are open.
  Result<Nonce> challenge(const std::string& identity, TimePoint now);

  struct Verified {
    Nonce server_nonce{};
    Nonce client_nonce{};
  };
  // kAuthFailed when the MAC does not match (wrong secret); kInvalidArgument when no live
  // challenge is pending for `identity`. The challenge is consumed either way.
  Result<Verified> verify(const std::string& identity, const Nonce& client_nonce, const Mac& mac,
                          TimePoint now);
  // The MAC of a reply carrying `report_bytes` to a verified asker.
  Mac reply_mac(const Verified& verified, std::string_view report_bytes) const;

  void forget(const std::string& identity) { open_.erase(identity); }
  std::size_t open() const { return open_.size(); }

 private:
  struct Open {
    Nonce nonce{};
    TimePoint expires{};
  };
  std::string secret_;
  Duration timeout_;
  std::size_t max_pending_;
  std::unordered_map<std::string, Open> open_;
};

}  // namespace tributary::coordinator
