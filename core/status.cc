#include "core/status.h"

namespace tributary {

std::string_view to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kPeerLost: return "peer lost";
    case StatusCode::kTimedOut: return "timed out";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kStaleEpoch: return "stale epoch";
    case StatusCode::kBadFrame: return "bad frame";
    case StatusCode::kMismatch: return "mismatch";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kAuthFailed: return "authentication failed";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kEvicted: return "evicted";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kRoundFailed: return "round failed";
  }
  return "unknown";
}

std::string Status::to_string() const {
  std::string out(tributary::to_string(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

}  // namespace tributary
