// The coordinator's ZAP handler (ZeroMQ Authentication Protocol, RFC 27), as pure code.
//
// libzmq asks the handler about every connection whose CURVE handshake got as far as
// INITIATE, i.e. whose client proved it holds the secret key of the public key it
// presents. The handler admits exactly the cluster's client key (control/curve_keys.h)
// under the Tributary domain, and refuses everything else: another key (a CURVE peer of
// another cluster), another mechanism (NULL or PLAIN: no proof at all), another domain.
// A refused peer gets a ZMTP ERROR and is closed by libzmq before any of its messages
// reaches the coordinator's logic; refusals carry the peer's address for the log.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/auth.h"
#include "core/status.h"

namespace tributary::coordinator {

struct ZapRequest {
  std::string request_id;
  std::string domain;
  std::string address;  // the peer's IP address, as libzmq reports it
  std::string mechanism;
  std::vector<std::string> credentials;
};

// `frames`: the request after the REP socket stripped its envelope:
// "1.0", request id, domain, address, routing id, mechanism, credentials...
// kBadFrame for another version or too few frames.
Result<ZapRequest> parse_zap_request(const std::vector<std::string>& frames);

struct ZapVerdict {
  bool allowed = false;
  std::string reason;  // why a refusal: for the reply's status text and the log
};
ZapVerdict judge_zap_request(const ZapRequest& request, const CurveKey& client_public_key);

// The reply frames: "1.0", request id, "200" / "400", status text, user id, metadata.
std::vector<std::string> zap_reply(const ZapRequest& request, const ZapVerdict& verdict);

}  // namespace tributary::coordinator
