// The wire form of `tributary status` (membership/cluster_status.h <-> StatusReport in
// control.proto) and the MACs of its exchange. Include from control-plane .cc files only
// (it includes the generated protobuf header, like control/codec.h).
//
//   request proof = HMAC(secret, "tributary/status-request/v1" | server_nonce | client_nonce)
//   reply MAC     = HMAC(secret, "tributary/status-reply/v1"   | server_nonce | client_nonce |
//                                 the serialized StatusReport)
//
// The domain prefixes differ from the join handshake's (control/join_auth.h), so no proof
// of one exchange is ever accepted in the other. The reply MAC covers the report bytes: a
// client that checks it knows the report came, unaltered, from a holder of the secret.
#pragma once

#include <cstddef>
#include <string_view>

#include "control/control.pb.h"
#include "core/auth.h"
#include "core/status.h"
#include "membership/cluster_status.h"

namespace tributary::control {

// The largest StatusReply a client accepts. The coordinator's report stays below it by
// construction (membership/cluster_status.h bounds every list, control/codec.h every
// label); tests/control/status_codec_test.cc checks the worst case.
// (8 MiB: the worst case, with every link reporting a full path list, is 4.3 MiB.)
inline constexpr std::size_t kMaxStatusReplyBytes = 8u << 20;

Mac status_request_mac(std::string_view secret, const Nonce& server_nonce,
                       const Nonce& client_nonce);
Mac status_reply_mac(std::string_view secret, const Nonce& server_nonce, const Nonce& client_nonce,
                     std::string_view report_bytes);

void link_to_proto(const membership::LinkPath& link, LinkPath* out);
// kBadFrame for a link that breaks the bounds (label lengths, more than kMaxLinkPaths paths).
Result<membership::LinkPath> link_from_proto(const LinkPath& link);

void status_to_proto(const membership::ClusterStatus& status, StatusReport* out);
// kBadFrame naming the field for a report that breaks the bounds of cluster_status.h
// (list lengths, label lengths, timings that are negative or not finite).
Result<membership::ClusterStatus> status_from_proto(const StatusReport& report);

}  // namespace tributary::control
