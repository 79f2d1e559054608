#include "coordinator/join_gate.h"

#include <utility>

#include "control/join_auth.h"

namespace tributary::coordinator {

JoinGate::JoinGate(std::string secret, Duration timeout, std::size_t max_pending)
    : secret_(std::move(secret)), timeout_(timeout), max_pending_(max_pending) {}

Result<Nonce> JoinGate::challenge(const std::string& identity, membership::MemberLabels labels,
                                  TimePoint now, membership::MemberId resume_id) {
  expire(now);
  if (!pending_.contains(identity) && pending_.size() >= max_pending_) {
    return error(StatusCode::kUnavailable,
                 std::to_string(pending_.size()) + " join handshakes already open");
  }
  Pending& p = pending_[identity];
  p.labels = std::move(labels);
  p.server_nonce = random_nonce();
  p.expires = now + timeout_;
  p.resume_id = resume_id;
  return p.server_nonce;
}

Result<JoinGate::Admitted> JoinGate::verify(const std::string& identity, const Nonce& client_nonce,
                                            const Mac& mac, TimePoint now) {
  auto it = pending_.find(identity);
  if (it == pending_.end() || now >= it->second.expires) {
    if (it != pending_.end()) pending_.erase(it);
    return error(StatusCode::kInvalidArgument,
                 "join proof without a live challenge (expired, or never requested)");
  }
  Pending p = std::move(it->second);
  pending_.erase(it);  // one proof per challenge, right or wrong
  const Mac expected =
      p.resume_id != 0
          ? control::resume_proof_mac(secret_, p.server_nonce, client_nonce, p.resume_id,
                                      p.labels.name)
          : control::join_proof_mac(secret_, p.server_nonce, client_nonce, p.labels.name);
  if (!macs_equal(expected, mac)) return error(StatusCode::kAuthFailed, "wrong cluster secret");
  return Admitted{std::move(p.labels), p.server_nonce, client_nonce, p.resume_id};
}

Mac JoinGate::coordinator_proof(const Admitted& admitted, membership::MemberId id) const {
  return control::coordinator_proof_mac(secret_, admitted.server_nonce, admitted.client_nonce, id);
}

const membership::MemberLabels* JoinGate::pending_labels(const std::string& identity) const {
  auto it = pending_.find(identity);
  return it == pending_.end() ? nullptr : &it->second.labels;
}

void JoinGate::expire(TimePoint now) {
  std::erase_if(pending_, [now](const auto& entry) { return now >= entry.second.expires; });
}

}  // namespace tributary::coordinator
