// The client of `tributary status`: one authenticated, read-only exchange with a
// coordinator (control/status_codec.h has the messages and MACs):
//
//   client -> StatusRequest;  coord -> Challenge;  client -> StatusProof;
//   coord  -> StatusReply (MACed report) | StatusDenied
//
// Guarantees: the secret never travels; the report is accepted only under a MAC that
// proves the coordinator knows the secret; the asker never becomes a member (it sends
// nothing a member sends); every wait ends by `timeout`, whether the coordinator is
// unreachable, silent or slow. Its own ZeroMQ context and socket, closed on return.
#pragma once

#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "membership/cluster_status.h"

namespace tributary::control_client {

// A standby coordinator (replicated coordinators) answers NotLeader: the request follows
// its hint to the leader once, within the same `timeout` (the report's asked_standby and
// answered_by say so); a standby that knows no leader yet gives kUnavailable, saying so.
// The leader's report is accepted only under the secret's MAC, like any other.
// kInvalidArgument for an endpoint that is not tcp://HOST:PORT or an empty secret;
// kTimedOut when no answer came within `timeout` (the coordinator is unreachable or
// down); kAuthFailed when the coordinator refused the secret, or its reply's MAC does
// not verify; kBadFrame for a reply that does not decode or breaks its bounds;
// kUnavailable for any other refusal (the reason is in the message).
Result<membership::ClusterStatus> fetch_status(const std::string& endpoint,
                                               const std::string& secret, Duration timeout);

}  // namespace tributary::control_client
