// The coordinator's half of the join handshake: pending challenges, keyed by connection
// identity. Pure (time passed in, no sockets) like the membership logic it feeds.
//
// Guarantees: a proof is checked against the nonce this gate chose for that very
// connection, once (a pending entry is consumed by verify(), right or wrong), and within
// `timeout` of the challenge; at most `max_pending` handshakes are open at a time, so a
// peer that opens connections and never answers cannot grow memory without bound.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>

#include "core/auth.h"
#include "core/clock.h"
#include "core/status.h"
#include "membership/membership.h"

namespace tributary::coordinator {

class JoinGate {
 public:
  JoinGate(std::string secret, Duration timeout, std::size_t max_pending);

  // Opens (or restarts) the handshake for `identity`; returns the nonce to send in a
  // Challenge. kUnavailable when max_pending handshakes are already open. `resume_id`
  // non-zero: a Resume of that member (its proof binds the id: control/join_auth.h).
  Result<Nonce> challenge(const std::string& identity, membership::MemberLabels labels,
                          TimePoint now, membership::MemberId resume_id = 0);

  struct Admitted {
    membership::MemberLabels labels;
    Nonce server_nonce{};
    Nonce client_nonce{};
    membership::MemberId resume_id = 0;  // non-zero: a verified Resume of this member
  };
  // kAuthFailed (the labels are returned in the message for the log) when the MAC does
  // not match; kInvalidArgument when no live challenge is pending for `identity`.
  Result<Admitted> verify(const std::string& identity, const Nonce& client_nonce, const Mac& mac,
                          TimePoint now);
  // The MAC that proves to the joiner that we know the secret too.
  Mac coordinator_proof(const Admitted& admitted, membership::MemberId id) const;
  // Labels of a pending handshake (for log lines), or nullptr.
  const membership::MemberLabels* pending_labels(const std::string& identity) const;

  void forget(const std::string& identity) { pending_.erase(identity); }
  void expire(TimePoint now);
  std::size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    membership::MemberLabels labels;
    Nonce server_nonce{};
    TimePoint expires{};
    membership::MemberId resume_id = 0;
  };
  std::string secret_;
  Duration timeout_;
  std::size_t max_pending_;
  std::unordered_map<std::string, Pending> pending_;
};

}  // namespace tributary::coordinator
