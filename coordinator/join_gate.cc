#include "coordinator/join_gate.h"

#include <utility>

#include "control/join_auth.h"

namespace tributary::coordinator {

JoinGate::JoinGate(std::string secret, Duration timeout, std::size_t max_pending,
                   std::size_t max_per_source)
    : secret_(std::move(secret)),
      timeout_(timeout),
      max_pending_(max_pending),
      max_per_source_(max_per_source) {}

Result<Nonce> JoinGate::challenge(const std::string& identity, const std::string& source,
                                  membership::MemberLabels labels, TimePoint now,
                                  membership::MemberId resume_id) {
  expire(now);
  if (auto it = pending_.find(identity); it != pending_.end()) {
    Pending& p = it->second;
    if (p.resume_id == resume_id && p.labels.name == labels.name) return p.server_nonce;
    erase(it);
  }
  if (pending_.size() >= max_pending_) {
    return error(StatusCode::kUnavailable,
                 std::to_string(pending_.size()) + " join handshakes already open");
  }
  if (pending_from(source) >= max_per_source_) {
    return error(StatusCode::kUnavailable, std::to_string(pending_from(source)) +
                                               " join handshakes already open from " +
                                               (source.empty() ? "this source" : source));
  }
  Pending& p = pending_[identity];
  p.source = source;
  p.labels = std::move(labels);
  p.server_nonce = random_nonce();
  p.expires = now + timeout_;
  p.resume_id = resume_id;
  ++per_source_[source];
  return p.server_nonce;
}

std::size_t JoinGate::pending_from(const std::string& source) const {
  auto it = per_source_.find(source);
  return it == per_source_.end() ? 0 : it->second;
}

JoinGate::Entries::iterator JoinGate::erase(Entries::iterator it) {
  auto count = per_source_.find(it->second.source);
  if (count != per_source_.end() && --count->second == 0) per_source_.erase(count);
  return pending_.erase(it);
}

void JoinGate::forget(const std::string& identity) {
  if (auto it = pending_.find(identity); it != pending_.end()) erase(it);
}

Result<JoinGate::Admitted> JoinGate::verify(const std::string& identity, const Nonce& client_nonce,
                                            const Mac& mac, TimePoint now) {
  auto it = pending_.find(identity);
  if (it == pending_.end() || now >= it->second.expires) {
    if (it != pending_.end()) erase(it);
    return error(StatusCode::kInvalidArgument,
                 "join proof without a live challenge (expired, or never requested)");
  }
  const Pending p = it->second;
  erase(it);  // one proof per challenge, right or wrong
  const Mac expected =
      p.resume_id != 0
          ? control::resume_proof_mac(secret_, p.server_nonce, client_nonce, p.resume_id,
                                      p.labels.name)
          : control::join_proof_mac(secret_, p.server_nonce, client_nonce, p.labels.name);
  if (!macs_equal(expected, mac)) return error(StatusCode::kAuthFailed, "wrong cluster secret");
  return Admitted{p.labels, p.server_nonce, client_nonce, p.resume_id};
}

Mac JoinGate::coordinator_proof(const Admitted& admitted, membership::MemberId id) const {
  return control::coordinator_proof_mac(secret_, admitted.server_nonce, admitted.client_nonce, id);
}

const membership::MemberLabels* JoinGate::pending_labels(const std::string& identity) const {
  auto it = pending_.find(identity);
  return it == pending_.end() ? nullptr : &it->second.labels;
}

void JoinGate::expire(TimePoint now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = now >= it->second.expires ? erase(it) : std::next(it);
  }
}

}  // namespace tributary::coordinator
