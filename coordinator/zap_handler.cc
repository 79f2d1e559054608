#include "coordinator/zap_handler.h"

#include <cstring>

#include "control/curve_keys.h"

namespace tributary::coordinator {

Result<ZapRequest> parse_zap_request(const std::vector<std::string>& frames) {
  if (frames.size() < 6) {
    return error(StatusCode::kBadFrame,
                 "ZAP request of " + std::to_string(frames.size()) + " frames, expected >= 6");
  }
  if (frames[0] != "1.0") return error(StatusCode::kBadFrame, "ZAP request of an unknown version");
  ZapRequest r;
  r.request_id = frames[1];
  r.domain = frames[2];
  r.address = frames[3];
  // frames[4] is the routing id of our own socket: nothing to judge.
  r.mechanism = frames[5];
  r.credentials.assign(frames.begin() + 6, frames.end());
  return r;
}

ZapVerdict judge_zap_request(const ZapRequest& r, const CurveKey& client_public_key) {
  if (r.mechanism != "CURVE")
    return {false, "mechanism " + r.mechanism + " offers no proof of the cluster secret"};
  if (r.domain != control::kZapDomain) return {false, "unknown ZAP domain"};
  if (r.credentials.size() != 1 || r.credentials[0].size() != client_public_key.size())
    return {false, "malformed CURVE credentials"};
  CurveKey presented{};
  std::memcpy(presented.data(), r.credentials[0].data(), presented.size());
  // Constant time, like every comparison with a secret-derived value.
  if (!macs_equal(presented, client_public_key))
    return {false, "its CURVE key does not derive from the cluster secret"};
  return {true, {}};
}

std::vector<std::string> zap_reply(const ZapRequest& r, const ZapVerdict& v) {
  return {"1.0", r.request_id, v.allowed ? "200" : "400", v.allowed ? "OK" : v.reason, "", ""};
}

}  // namespace tributary::coordinator
