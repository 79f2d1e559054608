// Blocking-with-a-deadline I/O on an authenticated PeerChannel (transport.h), for the
// transports that set themselves up over one (shared memory sends its segment name, RDMA
// its queue-pair address). Only the setup uses it; the links never block on a channel.
#pragma once

#include <cstddef>
#include <string>

#include "core/clock.h"
#include "core/status.h"

namespace tributary::transport {

// Moves exactly n bytes out of (out) or into `buf` over connection `fd` (either blocking
// mode), bounded by `deadline`. kTimedOut "<setup> with <peer> not done by the deadline";
// kPeerLost when the peer closes the connection or it fails. `setup` names what is being
// set up ("shared-memory setup").
Status channel_exchange(int fd, std::byte* buf, std::size_t n, bool out, Deadline deadline,
                        const std::string& peer, const std::string& setup);

// After the setup a link's channel carries nothing but doorbells; reading it is how the
// link sees its peer go. Reads (and drops) what is there without blocking: ok while the
// connection is open, kPeerLost "<peer> closed the connection" / "<peer> connection
// failed: <errno text>" once it is not.
Status drain_channel(int fd, const std::string& peer);

}  // namespace tributary::transport
