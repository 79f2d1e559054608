#include "coordinator/status_gate.h"

#include <utility>

#include "control/status_codec.h"

namespace tributary::coordinator {

StatusGate::StatusGate(std::string secret, Duration timeout, std::size_t max_pending)
    : secret_(std::move(secret)), timeout_(timeout), max_pending_(max_pending) {}

Result<Nonce> StatusGate::challenge(const std::string& identity, TimePoint now) {
  std::erase_if(open_, [now](const auto& entry) { return now >= entry.second.expires; });
  if (!open_.contains(identity) && open_.size() >= max_pending_) {
    return error(StatusCode::kUnavailable,
                 std::to_string(open_.size()) + " status requests already open");
  }
  Open& o = open_[identity];
  o.nonce = random_nonce();
  o.expires = now + timeout_;
  return o.nonce;
}

Result<StatusGate::Verified> StatusGate::verify(const std::string& identity,
                                                const Nonce& client_nonce, const Mac& mac,
                                                TimePoint now) {
  auto it = open_.find(identity);
  if (it == open_.end()) {
    return error(StatusCode::kInvalidArgument, "status proof without a status request");
  }
  const Open o = it->second;
  open_.erase(it);  // one proof per challenge, right or wrong
  if (now >= o.expires) {
    return error(StatusCode::kInvalidArgument, "status proof after its challenge expired");
  }
  if (!macs_equal(control::status_request_mac(secret_, o.nonce, client_nonce), mac))
    return error(StatusCode::kAuthFailed, "wrong cluster secret");
  return Verified{o.nonce, client_nonce};
}

Mac StatusGate::reply_mac(const Verified& verified, std::string_view report_bytes) const {
  return control::status_reply_mac(secret_, verified.server_nonce, verified.client_nonce,
                                   report_bytes);
}

}  // namespace tributary::coordinator
