// The coordinator's half of the join handshake: pending challenges, keyed by connection
// identity. Pure (time passed in, no sockets) like the membership logic it feeds.
//
// Guarantees: a proof is checked against the nonce this gate chose for that very
// connection, once (a pending entry is consumed by verify(), right or wrong), and within
// `timeout` of the challenge; at most `max_pending` handshakes are open at a time, and at
// most `max_per_source` from one source address, so a peer that opens connections and
// never answers cannot grow memory without bound nor take every slot. A request repeated
// on a connection whose challenge is still pending gets the same nonce again (an agent
// that retries a request must not find its answer to the first challenge refused).
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
  JoinGate(std::string secret, Duration timeout, std::size_t max_pending,
           std::size_t max_per_source);

  // Opens the handshake for `identity` (from `source`, the peer's address); returns the
  // nonce to send in a Challenge. A repeated request (same labels and resume id) while
  // the challenge is pending returns the same nonce; a different one restarts it.
  // kUnavailable when max_pending handshakes, or max_per_source from `source`, are
  // already open. `resume_id` non-zero: a Resume of that member (its proof binds the id:
  // control/join_auth.h).
  Result<Nonce> challenge(const std::string& identity, const std::string& source,
                          membership::MemberLabels labels, TimePoint now,
                          membership::MemberId resume_id = 0);

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

  void forget(const std::string& identity);
  void expire(TimePoint now);
  std::size_t pending() const { return pending_.size(); }
  std::size_t pending_from(const std::string& source) const;

 private:
  struct Pending {
    std::string source;
    membership::MemberLabels labels;
    Nonce server_nonce{};
    TimePoint expires{};
    membership::MemberId resume_id = 0;
  };
  using Entries = std::unordered_map<std::string, Pending>;
  Entries::iterator erase(Entries::iterator it);

  std::string secret_;
  Duration timeout_;
  std::size_t max_pending_;
  std::size_t max_per_source_;
  Entries pending_;
  std::unordered_map<std::string, std::size_t> per_source_;  // open handshakes by source
};

}  // namespace tributary::coordinator
