// Whether anything listens at a member's data addresses: a TCP connection opened and closed
// before a byte is sent (the endpoint drops such a connection silently: tcp_handshake.cc).
// For a pair of the failover link whose every path failed with an error
// (FailoverParams::on_stranded): an agent that is gone has no listener, and its host answers
// a connection with a reset at once, so the pair need not wait out its grace to know.
#pragma once

#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::transport {

// kOk: one of `addresses` ("host:port", "[v6]:port") accepted a connection. kPeerLost: every
// one refused it (ECONNREFUSED: nothing listens there). kTimedOut: some did not answer by
// `deadline` and none accepted. kInvalidArgument: an address that does not parse or
// resolve. Blocking (a name is resolved first), bounded by `deadline` per address.
Status knock(const std::vector<std::string>& addresses, Deadline deadline);

}  // namespace tributary::transport
